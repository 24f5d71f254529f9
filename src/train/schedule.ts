import { z } from "zod";

/** Learning-rate schedule: linear warmup to `lr`, then cosine decay to `lr * minLrRatio`. */
export const LrSchedule = z.object({
  lr: z.number().positive(),
  warmupSteps: z.number().int().nonnegative(),
  totalSteps: z.number().int().positive(),
  minLrRatio: z.number().min(0).max(1),
});
export type LrSchedule = z.infer<typeof LrSchedule>;

/** The learning rate for 0-based `step`; the trainer sends it with every update. */
export function lrAt(step: number, s: LrSchedule): number {
  if (step < s.warmupSteps) return (s.lr * (step + 1)) / s.warmupSteps;
  const decaySteps = Math.max(1, s.totalSteps - s.warmupSteps);
  const progress = Math.min(1, (step - s.warmupSteps) / decaySteps);
  const min = s.lr * s.minLrRatio;
  return min + (s.lr - min) * 0.5 * (1 + Math.cos(Math.PI * progress));
}
