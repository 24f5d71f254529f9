// Web search requests spaced out and retried: providers answer bursts with 429s, and a long
// evaluation or training run must not lose episodes to one transient 503 or dropped connection.

import { setTimeout as sleep } from "node:timers/promises";
import { ToolFailure } from "./guard.js";
import type { SearchBackend } from "./web-search.js";

export interface ThrottleOptions {
  /** Requests started per second at most, across every concurrent caller. */
  perSecond: number;
  /** Retries after a transient failure (HTTP 408, 429, 5xx, network error), with doubling waits. */
  retries: number;
  /** First wait before a retry; then doubled each time. */
  backoffMs?: number;
}

const transient = (err: unknown): boolean =>
  err instanceof ToolFailure && /^(network_error|http_408|http_429|http_5\d\d)$/.test(err.code);

export function throttledSearch(backend: SearchBackend, opts: ThrottleOptions): SearchBackend {
  const gapMs = 1000 / opts.perSecond;
  let nextStart = 0;
  /** Waits for this request's slot: slots are handed out in call order, `gapMs` apart. */
  const slot = async (signal: AbortSignal) => {
    const now = performance.now();
    const at = Math.max(now, nextStart);
    nextStart = at + gapMs;
    if (at > now) await sleep(at - now, undefined, { signal });
  };
  return {
    async search(query, k, signal) {
      for (let attempt = 0; ; attempt++) {
        await slot(signal);
        try {
          return await backend.search(query, k, signal);
        } catch (err) {
          if (attempt >= opts.retries || !transient(err) || signal.aborted) throw err;
          await sleep((opts.backoffMs ?? 500) * 2 ** attempt, undefined, { signal });
        }
      }
    },
  };
}
