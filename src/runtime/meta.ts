import { z } from "zod";
import { FinishReason, FormatError, ToolTag, trajectorySchema } from "../protocol/index.js";
import type { Budget, CallRecord, Sampling } from "./types.js";

const BudgetRecord: z.ZodType<Budget> = z.object({
  maxTurns: z.number(),
  maxTokens: z.number(),
  maxTimeMs: z.number(),
  maxFormatErrors: z.number(),
});

const SamplingRecord: z.ZodType<Sampling> = z.object({
  temperature: z.number(),
  topP: z.number(),
  seed: z.number().optional(),
  maxTokensPerTurn: z.number(),
});

const CallRecordSchema: z.ZodType<CallRecord> = z.object({
  turn: z.number().int(),
  modelMs: z.number(),
  modelTokens: z.number().int(),
  finishReason: z.enum(["stop", "length"]),
  action: z.enum(["continue", "tool", "feedback", "answer"]),
  tool: ToolTag.optional(),
  toolMs: z.number().optional(),
  duplicate: z.boolean().optional(),
  observationTokens: z.number().int().optional(),
  cutTokens: z.number().int().optional(),
});

/** What `runAgent` records about an episode, in `Trajectory.meta.runtime`. */
export const RuntimeMeta = z.object({
  budget: BudgetRecord,
  sampling: SamplingRecord,
  /** One per model call, so per model segment. */
  calls: z.array(CallRecordSchema),
  formatErrors: z.array(FormatError),
  /** The budget that ran out when a suggested answer stood in for the answer. */
  budgetExhausted: FinishReason.optional(),
  /** Why the episode ended in `model_error`. */
  error: z.string().optional(),
  /** Set when the model's server could not return the exact ids it sampled (or was prompted with). */
  exactIds: z.literal(false).optional(),
});
export type RuntimeMeta = z.infer<typeof RuntimeMeta>;

/** A trajectory as `runAgent` returns it: `meta.runtime` always there and typed. */
export const RunTrajectory = trajectorySchema({ runtime: RuntimeMeta });
export type RunTrajectory = z.infer<typeof RunTrajectory>;
