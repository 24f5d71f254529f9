import type { Trajectory } from "../protocol/index.js";
import type { MasTrace } from "../teacher/index.js";
import type { EpisodeCost } from "./metrics.js";

/** A CoA episode's cost: each model call bills the context it read plus what it wrote. */
export function trajectoryCost(t: Trajectory, solved: boolean): EpisodeCost {
  const s = t.stats;
  return {
    billedTokens: s.contextTokens + s.modelTokens,
    generatedTokens: s.modelTokens,
    observationTokens: s.toolTokens,
    modelCalls: s.modelCalls,
    toolCalls: Object.values(s.toolCalls).reduce((a, b) => a + b, 0),
    wallMs: s.wallMs,
    solved,
  };
}

/**
 * A multi-agent episode's cost on the same scale: every agent call bills its own context (role
 * prompt and the messages it was given) plus its output. `countTokens` must be the tokenizer the
 * CoA side is measured with, so the two are comparable.
 */
export function masTraceCost(trace: MasTrace, countTokens: (text: string) => number): EpisodeCost {
  const observations = trace.messages.filter((m) => m.kind === "observation");
  return {
    billedTokens: trace.stats.tokensIn + trace.stats.tokensOut,
    generatedTokens: trace.stats.tokensOut,
    observationTokens: observations.reduce((n, m) => n + countTokens(m.content), 0),
    modelCalls: trace.stats.agentCalls,
    toolCalls: trace.stats.toolCalls,
    wallMs: trace.stats.wallMs,
    solved: trace.reward !== null && trace.reward >= 1,
  };
}
