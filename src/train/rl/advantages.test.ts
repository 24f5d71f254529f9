import { describe, expect, it } from "vitest";
import { groupAdvantages, isInformative, overlongPenalty, tokenAdvantage } from "./advantages.js";

describe("groupAdvantages", () => {
  it("centers on the group mean and divides by the unbiased std", () => {
    const a = groupAdvantages([1, 0, 0, 0], { normalizeStd: true });
    // mean 0.25, unbiased std sqrt(0.75/3) = 0.5
    expect(a[0]).toBeCloseTo(1.5);
    expect(a[1]).toBeCloseTo(-0.5);
    expect(a.reduce((x, y) => x + y, 0)).toBeCloseTo(0);
  });

  it("only centers without std normalization", () => {
    expect(groupAdvantages([1, 0, 0, 0], { normalizeStd: false })).toEqual([0.75, -0.25, -0.25, -0.25]);
  });

  it("scales only the negative advantages by negativeScale", () => {
    const full = groupAdvantages([1, 0, 0, 0], { normalizeStd: true });
    const leaning = groupAdvantages([1, 0, 0, 0], { normalizeStd: true, negativeScale: 0.5 });
    expect(leaning[0]).toBeCloseTo(full[0]);
    for (const i of [1, 2, 3]) expect(leaning[i]).toBeCloseTo(full[i] / 2);
    // At 0 a failed sample is not pushed down at all: only the success moves.
    const [up, down] = groupAdvantages([1, 0], { normalizeStd: false, negativeScale: 0 });
    expect(up).toBe(0.5);
    expect(down).toBeCloseTo(0);
  });

  it("gives 0 to an all-equal group and to a group of one", () => {
    expect(groupAdvantages([1, 1, 1], { normalizeStd: true })).toEqual([0, 0, 0]);
    expect(groupAdvantages([1], { normalizeStd: true })).toEqual([0]);
  });
});

describe("tokenAdvantage", () => {
  it("gives a better sample's tokens drawn below positiveMinProb no advantage, and leaves the rest", () => {
    const [likely, unlikely] = [Math.log(0.9), Math.log(0.01)];
    expect(tokenAdvantage(1.5, likely, 0.05)).toBe(1.5);
    expect(tokenAdvantage(1.5, unlikely, 0.05)).toBe(0);
    expect(tokenAdvantage(1.5, Math.log(0.051), 0.05)).toBe(1.5);
    // A worse sample's tokens keep their (scaled) advantage, likely or not; without a floor, all do.
    expect(tokenAdvantage(-0.5, unlikely, 0.05)).toBe(-0.5);
    expect(tokenAdvantage(1.5, unlikely)).toBe(1.5);
  });
});

describe("isInformative (dynamic sampling)", () => {
  it("drops groups whose rewards are all equal, keeps mixed ones", () => {
    const groups = [[1, 1, 1, 1], [0, 0, 0, 0], [0, 1, 0, 0], [0.5, 0.5], [0.2, 0.3], [1]];
    expect(groups.filter(isInformative)).toEqual([
      [0, 1, 0, 0],
      [0.2, 0.3],
    ]);
  });
});

describe("overlongPenalty", () => {
  it("is 0 before the buffer, linear inside it, -1 beyond the max", () => {
    expect(overlongPenalty(800, 1000, 100)).toBe(0);
    expect(overlongPenalty(900, 1000, 100)).toBe(0);
    expect(overlongPenalty(950, 1000, 100)).toBeCloseTo(-0.5);
    expect(overlongPenalty(1000, 1000, 100)).toBeCloseTo(-1);
    expect(overlongPenalty(1001, 1000, 100)).toBe(-1);
  });
});
