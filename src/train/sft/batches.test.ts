import { describe, expect, it } from "vitest";
import { epochBatches, splitHoldout } from "./batches.js";

const lengths = Array.from({ length: 200 }, (_, i) => 10 + ((i * 37) % 90));
const ids = lengths.map((_, i) => i);

describe("epochBatches", () => {
  it("covers every example exactly once per epoch within the token budget", () => {
    const batches = epochBatches(ids, lengths, { batchTokens: 400, seed: 3, epoch: 0 });
    expect(batches.flat().sort((a, b) => a - b)).toEqual(ids);
    for (const b of batches)
      expect(Math.max(...b.map((i) => lengths[i])) * b.length).toBeLessThanOrEqual(400);
  });

  it("is a pure function of seed and epoch, and differs across epochs", () => {
    const a = epochBatches(ids, lengths, { batchTokens: 400, seed: 3, epoch: 1 });
    expect(epochBatches(ids, lengths, { batchTokens: 400, seed: 3, epoch: 1 })).toEqual(a);
    expect(epochBatches(ids, lengths, { batchTokens: 400, seed: 3, epoch: 2 })).not.toEqual(a);
  });

  it("groups similar lengths (bucketing keeps padding low)", () => {
    const batches = epochBatches(ids, lengths, { batchTokens: 400, seed: 0, epoch: 0 });
    const padded = batches.reduce((a, b) => a + Math.max(...b.map((i) => lengths[i])) * b.length, 0);
    const real = lengths.reduce((a, b) => a + b, 0);
    expect(padded / real).toBeLessThan(1.25);
  });
});

describe("splitHoldout", () => {
  it("holds out a seeded slice, capped, disjoint from training", () => {
    const s = splitHoldout(100, 0.1, 7, 5);
    expect(s.eval).toHaveLength(5);
    expect(s.train).toHaveLength(95);
    expect(new Set([...s.eval, ...s.train]).size).toBe(100);
    expect(splitHoldout(100, 0.1, 7, 5)).toEqual(s);
  });
});
