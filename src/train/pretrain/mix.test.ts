import { describe, expect, it } from "vitest";
import type { DocKind, PretrainDoc } from "./drills.js";
import { applyMix, parseMix } from "./mix.js";

const docs = (kind: DocKind, n: number): PretrainDoc[] =>
  Array.from({ length: n }, (_, i) => ({ kind, parts: [{ text: `${kind} ${i}`, copy: false }] }));

describe("parseMix", () => {
  it("reads kinds with optional weights; drills names the three drill kinds", () => {
    expect(parseMix("articles,drills")).toEqual({ articles: 1, lookup: 1, chain: 1, facts: 1 });
    expect(parseMix("articles:2, chain:0.25,lookup")).toEqual({ articles: 2, chain: 0.25, lookup: 1 });
  });

  it("refuses an unknown kind, a bad weight, and a mix of nothing", () => {
    expect(() => parseMix("articles,poems")).toThrow(/"poems" is not a kind/);
    expect(() => parseMix("articles:-1")).toThrow(/not a kind/);
    expect(() => parseMix("articles:0")).toThrow(/some kind a weight/);
  });
});

describe("applyMix", () => {
  const byKind = { articles: docs("articles", 3), chain: docs("chain", 400), pages: docs("pages", 5) };

  it("repeats whole weights, samples fractions, and leaves out kinds the mix does not name", () => {
    const mixed = applyMix(byKind, { articles: 2, chain: 0.25 }, 7);
    expect(mixed.filter((d) => d.kind === "articles")).toHaveLength(6);
    const chains = mixed.filter((d) => d.kind === "chain").length;
    expect(chains).toBeGreaterThan(70);
    expect(chains).toBeLessThan(130);
    expect(mixed.some((d) => d.kind === "pages")).toBe(false);
  });

  it("draws the same documents for the same seed", () => {
    expect(applyMix(byKind, { chain: 0.5 }, 1)).toEqual(applyMix(byKind, { chain: 0.5 }, 1));
    expect(applyMix(byKind, { chain: 0.5 }, 1)).not.toEqual(applyMix(byKind, { chain: 0.5 }, 2));
  });
});
