import { describe, expect, it } from "vitest";
import { pairedDifference, tCritical } from "./paired.js";

describe("tCritical", () => {
  it("matches the t table at 95% (two-sided)", () => {
    const table: [number, number][] = [
      [1, 12.706],
      [2, 4.303],
      [5, 2.571],
      [10, 2.228],
      [30, 2.042],
      [99, 1.984],
      [1000, 1.962],
    ];
    for (const [df, t] of table) expect(tCritical(df), `df ${df}`).toBeCloseTo(t, 3);
    expect(tCritical(10, 0.99)).toBeCloseTo(3.169, 3);
  });
});

describe("pairedDifference", () => {
  it("gives the mean per-task difference a − b and its t-interval, on the tasks both scored", () => {
    // Differences 0.5, 0.25, 0, 0.25 over four shared tasks; "e" is only in a.
    const a = { t1: 1, t2: 0.5, t3: 0, t4: 0.75, e: 1 };
    const b = { t1: 0.5, t2: 0.25, t3: 0, t4: 0.5 };
    const d = pairedDifference(a, b);
    const sd = Math.sqrt((0.25 ** 2 + 0 + 0.25 ** 2 + 0) / 3);
    const half = 3.182446 * (sd / 2); // t(0.975, 3) = 3.1824
    expect(d.tasks).toBe(4);
    expect(d.mean).toBeCloseTo(0.25, 12);
    expect(d.low).toBeCloseTo(0.25 - half, 5);
    expect(d.high).toBeCloseTo(0.25 + half, 5);
  });

  it("tells a gain from noise: an interval that excludes 0 only when the gain is consistent", () => {
    const ids = Array.from({ length: 40 }, (_, i) => `t${i}`);
    const sft = Object.fromEntries(ids.map((id) => [id, 0.25]));
    const consistent = Object.fromEntries(ids.map((id, i) => [id, i % 4 === 0 ? 0.25 : 0.5]));
    const noisy = Object.fromEntries(ids.map((id, i) => [id, i % 2 === 0 ? 0 : 0.5]));
    expect(pairedDifference(consistent, sft).low).toBeGreaterThan(0);
    const n = pairedDifference(noisy, sft);
    expect(n.mean).toBeCloseTo(0, 12);
    expect(n.low!).toBeLessThan(0);
    expect(n.high!).toBeGreaterThan(0);
  });

  it("has no interval below two shared tasks, and no mean with none", () => {
    expect(pairedDifference({ a: 1 }, { a: 0 })).toEqual({ tasks: 1, mean: 1, low: null, high: null });
    expect(pairedDifference({ a: 1 }, { b: 0 })).toEqual({ tasks: 0, mean: null, low: null, high: null });
    expect(pairedDifference({ a: 0, b: 0 }, { a: 0, b: 0 })).toEqual({ tasks: 2, mean: 0, low: 0, high: 0 });
  });
});
