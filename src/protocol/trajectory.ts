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

/** The `version` a record is written with; a record without one is v1 and is upgraded when read. */
export const TRAJECTORY_VERSION = 2;

/** Which stage wrote the record: what tells records apart, never which meta keys are present. */
export const TrajectoryOrigin = z.enum(["run", "rollout", "eval", "serve", "distill"]);
export type TrajectoryOrigin = z.infer<typeof TrajectoryOrigin>;

/** A meta namespace as protocol sees it: an object whose fields the writing folder's schema types. */
const Namespace = z.looseObject({});

/**
 * What producers record beside the episode, one namespace per writer, each typed by a zod schema in
 * the folder that writes it: `runtime` (src/runtime, `RuntimeMeta`: budget, sampling, calls, format
 * errors, error), `eval` (src/eval, `SampleVerdict`), `distill` (src/distill, `DistillMeta`), `serve`
 * (src/serve, `ServeMeta`). `legacy` keeps the keys of an upgraded v1 record that no writer owns.
 * Read a namespace typed through `trajectorySchema` with its owner's schema.
 */
export const TrajectoryMeta = z.object({
  runtime: Namespace.optional(),
  eval: Namespace.optional(),
  distill: Namespace.optional(),
  serve: Namespace.optional(),
  legacy: z.record(z.string(), z.unknown()).optional(),
});
export type TrajectoryMeta = z.infer<typeof TrajectoryMeta>;

/** The v2 record itself, without the v1 upgrade in front (`Trajectory` reads both). */
export const TrajectoryRecord = z.object({
  version: z.literal(TRAJECTORY_VERSION),
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
  origin: TrajectoryOrigin,
  meta: TrajectoryMeta,
});

/** The flat v1 meta keys the runtime wrote, and those distill wrote; `upgradeTrajectory` places the rest. */
const V1_RUNTIME_KEYS = [
  "budget",
  "sampling",
  "calls",
  "formatErrors",
  "budgetExhausted",
  "error",
  "exactIds",
];
const V1_DISTILL_KEYS = ["source", "taskKind", "answers", "driver", "teacher", "trace"];

const isObject = (v: unknown): v is Record<string, unknown> =>
  typeof v === "object" && v !== null && !Array.isArray(v);

/**
 * A record as v2 has it. v2 records (with `version`) pass unchanged. A v1 record (no `version`, flat
 * `meta`) gets `version: 2`, an `origin` when it had none (`eval` with an eval verdict, `serve` with a
 * response id, else `run`), and its meta keys moved to their writer's namespace: the runtime's keys
 * to `meta.runtime`, `eval` to `meta.eval`, `responseId` to `meta.serve`, a distilled record's keys to
 * `meta.distill`. Eval wrote the gold answers twice (`answers` beside `eval.answers`): the copy in
 * `meta.eval` stays. Any other key goes to `meta.legacy` unchanged. Anything not an object passes
 * through for the schema to reject.
 */
export function upgradeTrajectory(value: unknown): unknown {
  if (!isObject(value) || "version" in value) return value;
  const flat = isObject(value.meta) ? value.meta : {};
  const verdict = isObject(flat.eval) ? flat.eval : undefined;
  const origin =
    typeof value.origin === "string"
      ? value.origin
      : verdict
        ? "eval"
        : typeof flat.responseId === "string"
          ? "serve"
          : "run";
  const runtime: Record<string, unknown> = {};
  const distill: Record<string, unknown> = {};
  const legacy: Record<string, unknown> = {};
  for (const [key, v] of Object.entries(flat)) {
    if (key === "eval" || key === "responseId") continue;
    if (V1_RUNTIME_KEYS.includes(key)) runtime[key] = v;
    else if (origin === "distill" && V1_DISTILL_KEYS.includes(key)) distill[key] = v;
    else if (key === "answers" && verdict) continue;
    else legacy[key] = v;
  }
  const meta: Record<string, unknown> = {};
  if (Object.keys(runtime).length) meta.runtime = runtime;
  if (verdict)
    meta.eval =
      "answers" in verdict || !("answers" in flat) ? verdict : { ...verdict, answers: flat.answers };
  if (Object.keys(distill).length) meta.distill = distill;
  if (flat.responseId !== undefined) meta.serve = { responseId: flat.responseId };
  if (Object.keys(legacy).length) meta.legacy = legacy;
  return { ...value, version: TRAJECTORY_VERSION, origin, meta };
}

/**
 * The record schema with some meta namespaces typed by their owners' schemas, reading v1 records
 * through `upgradeTrajectory`: what every reader of trajectory files parses with.
 */
export function trajectorySchema<S extends Partial<Record<keyof TrajectoryMeta, z.ZodType>>>(namespaces: S) {
  return z.preprocess(
    upgradeTrajectory,
    TrajectoryRecord.extend({ meta: TrajectoryMeta.extend(namespaces) }),
  );
}

/**
 * The token-exact record of one episode (docs/protocol.md, "Trajectory records"), v2; parsing it
 * upgrades a v1 record. Text views are derived from ids with the tokenizer named by `tokenizer`;
 * never the reverse.
 */
export const Trajectory = trajectorySchema({});
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
