import { describe, expect, it } from "vitest";
import { trajectoryOf } from "../test-trajectories.js";
import { miniBatches, policySequence } from "./batch.js";

describe("policySequence", () => {
  const t = trajectoryOf(
    "r1",
    [1, 2],
    [
      { source: "model", ids: [10, 11, 12] },
      { source: "tool", ids: [20, 21] },
      { source: "model", ids: [13] },
    ],
  );

  it("aligns ids, mask, advantages and sampling logprobs; tool tokens get no gradient", () => {
    const s = policySequence(t, 0.5);
    expect(s.input_ids).toEqual([1, 2, 10, 11, 12, 20, 21, 13]);
    expect(s.loss_mask).toEqual([0, 0, 1, 1, 1, 0, 0, 1]);
    expect(s.advantages).toEqual([0, 0, 0.5, 0.5, 0.5, 0, 0, 0.5]);
    expect(s.old_logprobs.map((x) => Number(x.toFixed(2)))).toEqual([0, 0, -0.1, -0.2, -0.3, 0, 0, -0.1]);
  });

  it("leaves a better sample's unlikely tokens out under positiveMinProb", () => {
    // Sampled logprobs -0.1, -0.2, -0.3 | tool | -0.1: only the third is below log(p) = -0.25.
    expect(policySequence(t, 1, Math.exp(-0.25)).advantages).toEqual([0, 0, 1, 1, 0, 0, 0, 1]);
  });

  it("refuses a model segment without logprobs", () => {
    const bare = { ...t, segments: [{ source: "model" as const, ids: [5, 6] }] };
    expect(() => policySequence(bare, 1)).toThrow(/logprobs/);
  });
});

describe("miniBatches", () => {
  it("splits a seeded shuffle into runs of the given size", () => {
    const items = Array.from({ length: 10 }, (_, i) => i);
    const mbs = miniBatches(items, 4, 1);
    expect(mbs.map((b) => b.length)).toEqual([4, 4, 2]);
    expect(mbs.flat().sort((a, b) => a - b)).toEqual(items);
    expect(miniBatches(items, 4, 1)).toEqual(mbs);
  });
});
