import { segmentCosts, type Trajectory } from "../protocol/index.js";
import type { MasTrace } from "../teacher/index.js";
import type { EpisodeCost } from "./metrics.js";

/**
 * A CoA episode's cost: each model call bills the context it read plus what it wrote; with a prefix
 * cache each token of the one growing context is computed once.
 */
export function trajectoryCost(t: Trajectory, solved: boolean): EpisodeCost {
  const s = t.stats;
  return {
    billedTokens: s.contextTokens + s.modelTokens,
    processedTokens: s.promptTokens + s.modelTokens + s.toolTokens,
    generatedTokens: s.modelTokens,
    observationTokens: s.toolTokens,
    modelCalls: s.modelCalls,
    toolCalls: Object.values(s.toolCalls).reduce((a, b) => a + b, 0),
    wallMs: s.wallMs,
    solved,
  };
}

/**
 * `trajectoryCost` counted in another vocabulary (e.g. the bytes a teacher's traces were counted
 * in): the prompt and every segment decoded from its ids, then counted with `countTokens`.
 */
export function trajectoryCostIn(
  t: Trajectory,
  solved: boolean,
  decode: (ids: readonly number[]) => string,
  countTokens: (text: string) => number,
): EpisodeCost {
  const prompt = countTokens(decode(t.promptIds));
  const segments = t.segments.map((s) => ({ source: s.source, tokens: countTokens(decode(s.ids)) }));
  const c = segmentCosts(prompt, segments);
  return {
    ...trajectoryCost(t, solved),
    billedTokens: c.contextTokens + c.modelTokens,
    processedTokens: prompt + c.modelTokens + c.toolTokens,
    generatedTokens: c.modelTokens,
    observationTokens: c.toolTokens,
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
    processedTokens: trace.stats.tokensIn - trace.stats.tokensCached + trace.stats.tokensOut,
    generatedTokens: trace.stats.tokensOut,
    observationTokens: observations.reduce((n, m) => n + countTokens(m.content), 0),
    modelCalls: trace.stats.agentCalls,
    toolCalls: trace.stats.toolCalls,
    wallMs: trace.stats.wallMs,
    solved: trace.reward !== null && trace.reward >= 1,
  };
}
