import { describe, expect, it } from "vitest";
import { lrAt } from "./schedule.js";

describe("lrAt", () => {
  const s = { lr: 1e-3, warmupSteps: 4, totalSteps: 104, minLrRatio: 0.1 };

  it("warms up linearly, reaching the peak on the last warmup step", () => {
    expect(lrAt(0, s)).toBeCloseTo(2.5e-4);
    expect(lrAt(3, s)).toBeCloseTo(1e-3);
  });

  it("decays along a cosine to lr * minLrRatio", () => {
    expect(lrAt(4, s)).toBeCloseTo(1e-3);
    expect(lrAt(54, s)).toBeCloseTo(1e-4 + 0.9e-3 * 0.5);
    expect(lrAt(104, s)).toBeCloseTo(1e-4);
    expect(lrAt(500, s)).toBeCloseTo(1e-4);
  });

  it("is constant with minLrRatio 1 and no warmup", () => {
    const flat = { lr: 5e-5, warmupSteps: 0, totalSteps: 10, minLrRatio: 1 };
    expect([0, 5, 9].map((k) => lrAt(k, flat))).toEqual([5e-5, 5e-5, 5e-5]);
  });
});
