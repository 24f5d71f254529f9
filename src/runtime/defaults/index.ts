/**
 * The runtime's budgets and sampling and their defaults: a light entry beside `runtime/index.ts`, which
 * loads the agent loop and every tool behind it (~0.5 s through tsx). The CLI's `eval`, `run` and
 * `serve` declare their flags from these before loading the rest, so that they start their engine
 * first (docs/engine.md, "`coa eval`'s start").
 */

/** Where an episode stops; whichever limit is hit first ends it (see docs/runtime.md). */
export interface Budget {
  /** Model calls. */
  maxTurns: number;
  /** The whole context: prompt + model tokens + observation tokens. */
  maxTokens: number;
  /** Wall time of the episode, model and tools included. */
  maxTimeMs: number;
  /** Format errors tolerated; one more ends the episode. */
  maxFormatErrors: number;
}

export interface Sampling {
  temperature: number;
  topP: number;
  seed?: number;
  /** Tokens per model call. A call that hits it is continued by the next call, not cut off. */
  maxTokensPerTurn: number;
}

export const DEFAULT_BUDGET: Budget = {
  maxTurns: 24,
  maxTokens: 16_384,
  maxTimeMs: 10 * 60_000,
  maxFormatErrors: 3,
};

/** Temperature 1 and top-p 1 sample the policy itself, so recorded logprobs are what RL needs. */
export const DEFAULT_SAMPLING: Sampling = { temperature: 1, topP: 1, maxTokensPerTurn: 1024 };
