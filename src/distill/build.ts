import { z } from "zod";
import type { Tokenizer } from "../model/index.js";
import {
  normalizeQuery,
  type ProfileName,
  renderObservation,
  renderPrompt,
  renderSteps,
  type Segment,
  type Step,
  segmentCosts,
  TRAJECTORY_VERSION,
  type Trajectory,
  trajectorySchema,
} from "../protocol/index.js";
import { MasTrace } from "../teacher/index.js";
import type { Piece } from "./convert.js";

export interface TextSegment {
  source: "model" | "tool";
  text: string;
}

/**
 * The completion as the runtime would produce it: the model writes its steps up to a tool call's
 * closing tag (where generation stops), the runtime appends `renderObservation(raw tool text)`, the
 * model goes on. Joined, the texts read like `renderSteps` of all the steps.
 */
export function segmentTexts(pieces: readonly Piece[]): TextSegment[] {
  const out: TextSegment[] = [];
  let written: Step[] = [];
  for (const piece of pieces) {
    if (piece.step.type !== "observation") {
      written.push(piece.step);
      continue;
    }
    out.push({ source: "model", text: renderSteps(written) });
    out.push({ source: "tool", text: renderObservation(piece.raw ?? piece.step.text) });
    written = [];
  }
  if (written.length) out.push({ source: "model", text: renderSteps(written) });
  return out;
}

/** Same call: same tool, arguments equal up to whitespace and (outside code) letter case, as the runtime's guard sees it. */
export function callKey(step: Extract<Step, { type: "tool_call" }>): string {
  const args = normalizeQuery(step.args);
  return `${step.tool}\u0000${step.tool === "code" ? args : args.toLowerCase()}`;
}

/** What distill records about a kept trajectory, in `Trajectory.meta.distill`: the trace it came from. */
export const DistillMeta = z.object({
  source: MasTrace.shape.source,
  taskKind: MasTrace.shape.taskKind,
  /** The task's gold answers. */
  answers: MasTrace.shape.answers,
  driver: MasTrace.shape.driver,
  /** The teacher's own counts for the trace (`MasTrace.stats`). */
  teacher: MasTrace.shape.stats,
  /** `file:line` of the trace. */
  trace: z.string(),
});
export type DistillMeta = z.infer<typeof DistillMeta>;

/** A distilled record (`native.jsonl`): `meta.distill` typed. Reads v1 files too. */
export const DistilledTrajectory = trajectorySchema({ distill: DistillMeta });
export type DistilledTrajectory = z.infer<typeof DistilledTrajectory>;

export interface BuildOptions {
  tokenizer: Tokenizer;
  profile: ProfileName;
  id: string;
  distill?: DistillMeta;
}

/**
 * The token-exact record of a converted trace: prompt ids from `renderPrompt`, then one segment
 * per model turn and per observation, each tokenized on its own as the runtime tokenizes them.
 * Model segments carry no logprobs: the text is the teacher's, not sampled from the target model.
 */
export function buildTrajectory(trace: MasTrace, pieces: readonly Piece[], opts: BuildOptions): Trajectory {
  const tok = opts.tokenizer;
  const promptIds = tok.encode(renderPrompt({ profile: opts.profile, question: trace.question }));
  const segments: Segment[] = segmentTexts(pieces).map((s) => ({
    source: s.source,
    ids: tok.encode(s.text),
  }));
  const steps = pieces.map((p) => p.step);
  const answer = steps.findLast((s) => s.type === "answer");
  return {
    version: TRAJECTORY_VERSION,
    id: opts.id,
    taskId: trace.taskId,
    question: trace.question,
    profile: opts.profile,
    model: trace.model,
    tokenizer: tok.name,
    promptIds,
    segments,
    answer: answer?.type === "answer" ? answer.text : null,
    finishReason: "answer",
    stats: stats(trace, steps, promptIds.length, segments),
    ...(trace.reward === null ? {} : { reward: trace.reward }),
    origin: "distill",
    meta: opts.distill ? { distill: opts.distill } : {},
  };
}

function stats(
  trace: MasTrace,
  steps: readonly Step[],
  promptTokens: number,
  segments: readonly Segment[],
): Trajectory["stats"] {
  const toolCalls: Record<string, number> = {};
  const seen = new Set<string>();
  let duplicateCalls = 0;
  for (const step of steps) {
    if (step.type !== "tool_call") continue;
    toolCalls[step.tool] = (toolCalls[step.tool] ?? 0) + 1;
    const key = callKey(step);
    if (seen.has(key)) duplicateCalls++;
    seen.add(key);
  }
  const costs = segmentCosts(
    promptTokens,
    segments.map((s) => ({ source: s.source, tokens: s.ids.length })),
  );
  const ms = (tool: boolean) =>
    trace.messages.filter((m) => (m.from === "tool") === tool).reduce((sum, m) => sum + m.ms, 0);
  return {
    turns: costs.modelCalls,
    toolCalls,
    duplicateCalls,
    formatErrors: 0,
    promptTokens,
    ...costs,
    wallMs: trace.stats.wallMs,
    modelMs: ms(false),
    toolMs: ms(true),
  };
}
