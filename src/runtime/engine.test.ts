import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Engine } from "../model/index.js";
import { completionIds, lossMask, renderPrompt } from "../protocol/index.js";
import { runAgent } from "./agent.js";
import type { RunTrajectory } from "./meta.js";

// The embedded engine (micro preset, untrained) as the model: whatever it writes, the record must
// be token-exact, which is what RL depends on.
let engine: Engine;
let trajectory: RunTrajectory;

beforeAll(async () => {
  engine = await Engine.start({ preset: "micro" }, { dtype: "fp32", onLog: () => {} });
  trajectory = await runAgent({
    model: engine,
    tools: new Map(),
    profile: "web",
    question: "How long is the Kell River?",
    budget: { maxTurns: 3, maxFormatErrors: 20 },
    sampling: { seed: 1, maxTokensPerTurn: 24 },
  });
}, 120_000);
afterAll(() => engine?.close());

describe("runAgent on the embedded engine", () => {
  it("records the ids the engine sampled, with their logprobs, and the ids it was fed", async () => {
    const ids = [...trajectory.promptIds, ...completionIds(trajectory)];
    expect(trajectory.stats.modelCalls).toBeGreaterThan(0);
    expect(trajectory.meta.runtime.exactIds).toBeUndefined();
    // Re-scoring the whole record gives back, at every model token, the logprob recorded when it
    // was sampled: the engine saw exactly these ids, in this order, at each call.
    const [scored] = await engine.score([ids]);
    const mask = lossMask(trajectory);
    const recorded = trajectory.segments.flatMap((s) => (s.source === "model" ? s.logprobs! : []));
    const rescored = mask.flatMap((m, i) => (m ? [scored![trajectory.promptIds.length + i]!] : []));
    expect(recorded.length).toBeGreaterThan(0);
    expect(rescored).toHaveLength(recorded.length);
    for (const [i, lp] of recorded.entries()) expect(rescored[i]).toBeCloseTo(lp, 3);
  });

  it("tokenizes the prompt once with the engine and caps each call at maxTokensPerTurn", async () => {
    const prompt = renderPrompt({ profile: "web", question: trajectory.question });
    expect(trajectory.promptIds).toEqual(await engine.tokenize(prompt));
    for (const s of trajectory.segments)
      if (s.source === "model") expect(s.ids.length).toBeLessThanOrEqual(24);
  });
});
