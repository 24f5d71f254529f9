// Web search answers kept on disk, one JSON file per (provider, endpoint, query, k): web results cost
// money and change over time, so a rerun of an evaluation or of training sees the answers the first
// run saw, and pays once.

import { createHash } from "node:crypto";
import { mkdir, readFile, rename, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { z } from "zod";
import type { SearchHit } from "./search-results.js";
import type { SearchBackend } from "./web-search.js";

const CacheEntry = z.object({
  provider: z.string(),
  query: z.string(),
  k: z.number(),
  fetchedAt: z.string(),
  hits: z.array(z.object({ title: z.string(), url: z.string().optional(), snippet: z.string() })),
});

export interface WebCacheOptions {
  dir: string;
  /** Names the source of the answers (e.g. `serper https://google.serper.dev`): part of the key. */
  provider: string;
}

/** `backend` behind a disk cache: a cached answer is returned without a request; failures are not kept. */
export function cachedSearch(backend: SearchBackend, opts: WebCacheOptions): SearchBackend {
  const fileOf = (query: string, k: number) =>
    join(
      opts.dir,
      `${createHash("sha256")
        .update(JSON.stringify([opts.provider, query, k]))
        .digest("hex")}.json`,
    );
  return {
    async search(query, k, signal) {
      const file = fileOf(query, k);
      const cached = await readFile(file, "utf8").then(
        (text) => CacheEntry.safeParse(JSON.parse(text)),
        () => undefined,
      );
      if (cached?.success) return cached.data.hits as SearchHit[];
      const hits = await backend.search(query, k, signal);
      const entry = { provider: opts.provider, query, k, fetchedAt: new Date().toISOString(), hits };
      await mkdir(opts.dir, { recursive: true });
      // Written aside and renamed: concurrent episodes asking the same query never read half a file.
      const tmp = `${file}.${process.pid}.${Math.random().toString(36).slice(2)}.tmp`;
      await writeFile(tmp, `${JSON.stringify(entry)}\n`);
      await rename(tmp, file);
      return hits;
    },
  };
}
