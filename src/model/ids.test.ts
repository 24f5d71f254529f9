import { describe, expect, it } from "vitest";
import { appendAll } from "./ids.js";

describe("appendAll", () => {
  it("appends in order, in place", () => {
    const target = [1, 2];
    appendAll(target, [3, 4]);
    expect(target).toEqual([1, 2, 3, 4]);
  });

  it("takes more items than a spread into push could (no stack overflow)", () => {
    const many = Array.from({ length: 500_000 }, (_, i) => i);
    expect(() => [].push(...(many as never[]))).toThrow(RangeError);
    const target: number[] = [];
    appendAll(target, many);
    expect(target).toHaveLength(500_000);
    expect(target.at(-1)).toBe(499_999);
  });
});
