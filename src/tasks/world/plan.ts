import { z } from "zod";
import { Attr, EntityType } from "./schema.js";

/** The result of an earlier step of the same plan. */
export const PlanRef = z.object({ ref: z.number().int().nonnegative() });
export type PlanRef = z.infer<typeof PlanRef>;

/** A name written in the question, or an earlier step's result. */
export const PlanSubject = z.union([z.string(), PlanRef]);
export type PlanSubject = z.infer<typeof PlanSubject>;

export const ProgramName = z.enum([
  "primes_below",
  "digit_sum_power",
  "modpow",
  "fib_mod",
  "sum_divisible",
  "collatz_steps",
  "factorial_zeros",
  "lcm3",
]);
export type ProgramName = z.infer<typeof ProgramName>;

export const LookupStep = z.object({
  op: z.literal("lookup"),
  subject: PlanSubject,
  type: EntityType,
  attr: Attr,
});
export const ComputeStep = z.object({
  op: z.literal("compute"),
  fn: z.enum(["difference", "abs_difference", "sum"]),
  args: z.array(PlanRef).min(2),
});
export const CompareStep = z.object({
  op: z.literal("compare"),
  pick: z.enum(["min", "max"]),
  values: z.tuple([PlanRef, PlanRef]),
  labels: z.tuple([PlanSubject, PlanSubject]),
});
export const ProgramStep = z.object({
  op: z.literal("program"),
  name: ProgramName,
  params: z.record(z.string(), z.number().int()),
});

export type ComputeFn = z.infer<typeof ComputeStep>["fn"];

/** What a compute step yields from its arguments' values: the number its code prints. */
export function computeValue(fn: ComputeFn, values: readonly number[]): number {
  switch (fn) {
    case "sum":
      return values.reduce((a, b) => a + b, 0);
    case "difference":
      return values[0]! - values[1]!;
    case "abs_difference":
      return Math.abs(values[0]! - values[1]!);
  }
}

/** Which of its two values a compare step picks: 0, the first, or 1, the second (a tie: the second). */
export function comparedPick(pick: z.infer<typeof CompareStep>["pick"], a: number, b: number): 0 | 1 {
  return (pick === "min" ? a < b : a > b) ? 0 : 1;
}

export const PlanStep = z.discriminatedUnion("op", [LookupStep, ComputeStep, CompareStep, ProgramStep]);
export type PlanStep = z.infer<typeof PlanStep>;

/**
 * A machine-readable decomposition of a world question, kept in `task.meta.plan`: which facts to look
 * up about whom, then what to compute. It names only what the question names; every intermediate
 * entity and value is left for the solver to find. The answer is the last step's result.
 */
export const Plan = z.object({ steps: z.array(PlanStep).min(1) });
export type Plan = z.infer<typeof Plan>;
