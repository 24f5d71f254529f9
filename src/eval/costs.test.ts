import { describe, expect, it } from "vitest";
import { ByteTokenizer, type Tokenizer, trainBpe } from "../model/index.js";
import { emptyTrajectoryStats, renderPrompt, segmentCosts, type Trajectory } from "../protocol/index.js";
import { trajectoryCost, trajectoryCostIn } from "./costs.js";

const TURNS: [source: "model" | "tool", text: string][] = [
  ["model", "<think>look it up</think>\n<wiki_search>Dune author</wiki_search>"],
  ["tool", "\n<observation>Dune is a 1965 novel by Frank Herbert.</observation>\n"],
  ["model", "<answer>Frank Herbert</answer>"],
];

function trajectory(tok: Tokenizer): Trajectory {
  const promptIds = tok.encode(renderPrompt({ profile: "mhqa", question: "Who wrote Dune?" }));
  const segments = TURNS.map(([source, text]) => ({ source, ids: tok.encode(text) }));
  const costs = segmentCosts(
    promptIds.length,
    segments.map((s) => ({ source: s.source, tokens: s.ids.length })),
  );
  return {
    version: 2,
    id: "t",
    question: "Who wrote Dune?",
    profile: "mhqa",
    model: "m",
    tokenizer: tok.name,
    promptIds,
    segments,
    answer: "Frank Herbert",
    finishReason: "answer",
    stats: { ...emptyTrajectoryStats(), promptTokens: promptIds.length, ...costs },
    origin: "run",
    meta: {},
  };
}

describe("trajectory costs", () => {
  const bytes = new ByteTokenizer();

  it("bills each call's context and computes the one context once under a prefix cache", () => {
    const t = trajectory(bytes);
    const cost = trajectoryCost(t, true);
    const [p, a, o, b] = [t.promptIds, ...t.segments.map((s) => s.ids)].map((ids) => ids.length);
    expect(cost.billedTokens).toBe(p + (p + a + o) + a + b);
    expect(cost.processedTokens).toBe(p + a + o + b);
    expect(cost.modelCalls).toBe(2);
  });

  it("counts a trajectory of one vocabulary in another, as the trajectory in that vocabulary costs", () => {
    const bpe = trainBpe(
      TURNS.map(([, text]) => text),
      { vocabSize: bytes.vocabSize + 30 },
    );
    const inBytes = trajectoryCostIn(
      trajectory(bpe),
      true,
      (ids) => bpe.decode(ids),
      (s) => bytes.encode(s).length,
    );
    expect(inBytes).toEqual(trajectoryCost(trajectory(bytes), true));
    expect(trajectoryCost(trajectory(bpe), true).processedTokens).toBeLessThan(inBytes.processedTokens);
  });
});
