import type { Trajectory } from "../protocol/index.js";

/**
 * A native trajectory record with the given token runs, for tests: `model` and `tool` segments in
 * order, model segments carrying logprobs.
 */
export function trajectoryOf(
  id: string,
  promptIds: number[],
  segments: Array<{ source: "model" | "tool"; ids: number[] }>,
): Trajectory {
  const modelTokens = segments.filter((s) => s.source === "model").reduce((a, s) => a + s.ids.length, 0);
  return {
    version: 2,
    id,
    question: "q",
    profile: "mhqa",
    model: "test",
    tokenizer: "coa-byte-v1",
    promptIds,
    segments: segments.map((s) =>
      s.source === "model"
        ? { source: "model", ids: s.ids, logprobs: s.ids.map((_, i) => -0.1 * (i + 1)) }
        : s,
    ),
    answer: null,
    finishReason: "answer",
    stats: {
      turns: 1,
      toolCalls: {},
      duplicateCalls: 0,
      formatErrors: 0,
      promptTokens: promptIds.length,
      modelTokens,
      toolTokens: segments.filter((s) => s.source === "tool").reduce((a, s) => a + s.ids.length, 0),
      contextTokens: 0,
      modelCalls: 1,
      wallMs: 0,
      modelMs: 0,
      toolMs: 0,
    },
    origin: "run",
    meta: {},
  };
}
