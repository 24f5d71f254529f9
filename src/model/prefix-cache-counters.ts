import type { EngineInfo } from "./engine-api.js";

/** The engine's prefix-cache counters (`/info`'s `prefix_cache`), cumulative since it started. */
export interface PrefixCacheCounters {
  hits: number;
  misses: number;
  saved_prefill_tokens: number;
  prefill_tokens: number;
}

/** The counters where the engine keeps a prefix cache; null where it has none or does not say. */
export function prefixCacheCounters(info: Pick<EngineInfo, "prefix_cache">): PrefixCacheCounters | null {
  const cache = info.prefix_cache;
  if (!cache?.enabled) return null;
  const { hits, misses, saved_prefill_tokens, prefill_tokens } = cache;
  return { hits, misses, saved_prefill_tokens, prefill_tokens };
}

/**
 * What the cache did between two readings (around a step's rollouts): hits and misses, prompt tokens
 * reused and computed. Null when either reading is missing or a counter went back (the readings came
 * from two engine processes, whose difference says nothing).
 */
export function prefixCacheDelta(
  before: PrefixCacheCounters | null,
  after: PrefixCacheCounters | null,
): PrefixCacheCounters | null {
  if (!before || !after) return null;
  const delta = {
    hits: after.hits - before.hits,
    misses: after.misses - before.misses,
    saved_prefill_tokens: after.saved_prefill_tokens - before.saved_prefill_tokens,
    prefill_tokens: after.prefill_tokens - before.prefill_tokens,
  };
  return Object.values(delta).every((n) => n >= 0) ? delta : null;
}
