import { z } from "zod";

/**
 * The outcome of scoring one prediction. `error` is set when the scorer could not decide (sandbox
 * missing, judge down, task without tests): then `score` is 0 but means "unknown", never "wrong".
 */
export const Score = z.object({
  score: z.number().min(0).max(1),
  correct: z.boolean(),
  error: z.string().nullable(),
  /** Which scorer decided: "em", "math", "code", "judge", "format". */
  scorer: z.string(),
  /** Side numbers worth recording: f1 next to em, tests passed, the judge's reason length… */
  metrics: z.record(z.string(), z.number()).optional(),
});
export type Score = z.infer<typeof Score>;

export function scored(scorer: string, correct: boolean, metrics?: Record<string, number>): Score {
  return { score: correct ? 1 : 0, correct, error: null, scorer, ...(metrics ? { metrics } : {}) };
}

export function scoreError(scorer: string, error: string): Score {
  return { score: 0, correct: false, error, scorer };
}
