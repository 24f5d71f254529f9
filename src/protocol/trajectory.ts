import { z } from "zod";
import { DialectName } from "./dialects.js";
import { ProfileName } from "./tags.js";

/**
 * A run of tokens with one origin. Model segments carry the logprob of every token as sampled;
 * tool segments (observations, injected by the runtime) never do and never get loss.
 */
export const Segment = z.discriminatedUnion("source", [
  z.object({
    source: z.literal("model"),
    ids: z.array(z.number().int()),
    logprobs: z.array(z.number()).optional(),
  }),
  z.object({ source: z.literal("tool"), ids: z.array(z.number().int()) }),
]);
export type Segment = z.infer<typeof Segment>;

export const FinishReason = z.enum([
  "answer",
  "promoted_suggested_answer",
  "fallback_suggested_answer",
  "max_turns",
  "max_tokens",
  "max_time",
  "format_errors",
  "model_error",
]);
export type FinishReason = z.infer<typeof FinishReason>;

export const TrajectoryStats = z.object({
  turns: z.number().int().nonnegative(),
  toolCalls: z.record(z.string(), z.number().int().nonnegative()),
  duplicateCalls: z.number().int().nonnegative(),
  formatErrors: z.number().int().nonnegative(),
  promptTokens: z.number().int().nonnegative(),
  modelTokens: z.number().int().nonnegative(),
  toolTokens: z.number().int().nonnegative(),
  /** Sum over model calls of the context each call read: what an API bills as input. */
  contextTokens: z.number().int().nonnegative(),
  modelCalls: z.number().int().nonnegative(),
  wallMs: z.number().nonnegative(),
  modelMs: z.number().nonnegative(),
  toolMs: z.number().nonnegative(),
});
export type TrajectoryStats = z.infer<typeof TrajectoryStats>;

/** All counters at zero: where an episode's stats start. */
export function emptyTrajectoryStats(): TrajectoryStats {
  return {
    turns: 0,
    toolCalls: {},
    duplicateCalls: 0,
    formatErrors: 0,
    promptTokens: 0,
    modelTokens: 0,
    toolTokens: 0,
    contextTokens: 0,
    modelCalls: 0,
    wallMs: 0,
    modelMs: 0,
    toolMs: 0,
  };
}

/**
 * The token-exact record of one episode (docs/protocol.md, "Trajectory records"). Text views are
 * derived from ids with the tokenizer named by `tokenizer`; never the reverse.
 */
export const Trajectory = z.object({
  id: z.string(),
  taskId: z.string().optional(),
  question: z.string(),
  profile: ProfileName,
  /** Whose protocol rules the model follows; absent means this project's (`coa`). */
  dialect: DialectName.optional(),
  /**
   * How the prompt was made, when not by `renderPrompt` with our system prompt: through the model's
   * chat template (`chatTemplate`), and/or with a system prompt the user supplied. Such a prompt
   * cannot be rebuilt from the question, so checks of the record skip that comparison.
   */
  promptFormat: z.object({ chatTemplate: z.boolean(), customSystemPrompt: z.boolean() }).optional(),
  model: z.string(),
  /** Identifies the vocabulary the ids belong to, e.g. "coa-byte-v1" or a HF model name. */
  tokenizer: z.string(),
  promptIds: z.array(z.number().int()),
  segments: z.array(Segment),
  answer: z.string().nullable(),
  finishReason: FinishReason,
  stats: TrajectoryStats,
  reward: z.number().optional(),
  /** Where the record came from: "run", "distill", "rollout", "eval". */
  origin: z.string().optional(),
  meta: z.record(z.string(), z.unknown()).default({}),
});
export type Trajectory = z.infer<typeof Trajectory>;

/** All ids after the prompt, in order. */
export function completionIds(t: Pick<Trajectory, "segments">): number[] {
  return t.segments.flatMap((s) => s.ids);
}

/** 1 exactly on model-written tokens, 0 on tool tokens; aligned with `completionIds`. */
export function lossMask(t: Pick<Trajectory, "segments">): number[] {
  return t.segments.flatMap((s) => s.ids.map(() => (s.source === "model" ? 1 : 0)));
}

/**
 * What the model calls of a trajectory read and wrote, from the prompt length and each segment's
 * length (in any tokenizer): each call reads the prompt and everything before its own turn.
 */
export function segmentCosts(
  promptTokens: number,
  segments: readonly { source: Segment["source"]; tokens: number }[],
): Pick<TrajectoryStats, "modelTokens" | "toolTokens" | "contextTokens" | "modelCalls"> {
  const out = { modelTokens: 0, toolTokens: 0, contextTokens: 0, modelCalls: 0 };
  for (const seg of segments) {
    if (seg.source === "model") {
      out.contextTokens += promptTokens + out.modelTokens + out.toolTokens;
      out.modelCalls++;
      out.modelTokens += seg.tokens;
    } else out.toolTokens += seg.tokens;
  }
  return out;
}
