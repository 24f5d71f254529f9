import { describe, expect, it } from "vitest";
import { prefixCacheCounters, prefixCacheDelta } from "./prefix-cache-counters.js";

const reading = (hits: number, misses: number, saved: number, computed: number) => ({
  hits,
  misses,
  saved_prefill_tokens: saved,
  prefill_tokens: computed,
});

describe("prefixCacheCounters", () => {
  it("reads the engine's counters, and nothing where it keeps no cache", () => {
    const cache = { enabled: true, ...reading(3, 1, 900, 250), entries: 2 };
    expect(prefixCacheCounters({ prefix_cache: cache })).toEqual(reading(3, 1, 900, 250));
    expect(prefixCacheCounters({ prefix_cache: { ...cache, enabled: false } })).toBeNull();
    expect(prefixCacheCounters({})).toBeNull();
  });
});

describe("prefixCacheDelta", () => {
  it("is what the cache did between two readings", () => {
    expect(prefixCacheDelta(reading(3, 1, 900, 250), reading(10, 2, 3100, 700))).toEqual(
      reading(7, 1, 2200, 450),
    );
  });

  it("is unknown across two engine processes, or without a reading", () => {
    // A new engine counts from zero: a difference would mix two engines' work.
    expect(prefixCacheDelta(reading(30, 4, 9000, 900), reading(2, 1, 400, 300))).toBeNull();
    expect(prefixCacheDelta(null, reading(2, 1, 400, 300))).toBeNull();
    expect(prefixCacheDelta(reading(2, 1, 400, 300), null)).toBeNull();
  });
});
