import type { Handler } from "hono";
import { z } from "zod";
import type { SearchHit } from "../tools/index.js";
import type { ToolBackend } from "./backend.js";
import { withinDeadline } from "./deadline.js";
import { readBody } from "./errors.js";

/** The part of Serper's search request AFM's web-search client sends. */
export const SearchRequest = z.strictObject({
  q: z.string().min(1).max(2_000),
  num: z.number().int().positive().max(100).default(10),
});

/**
 * Serper's response shape, organic results only. A corpus document without a `url` has no link, so its
 * result has none either (clients read `link` with a default).
 */
export function serperResponse(q: string, num: number, hits: SearchHit[]) {
  return {
    searchParameters: { q, num, type: "search", engine: "coa-bm25" },
    organic: hits.map((h, i) => ({
      title: h.title,
      ...(h.url ? { link: h.url } : {}),
      snippet: h.snippet,
      position: i + 1,
    })),
  };
}

export const searchHandler =
  (backend: ToolBackend, opts: { timeoutMs: number }): Handler =>
  async (c) => {
    const req = await readBody(c, SearchRequest);
    const hits = await withinDeadline(c, opts.timeoutMs, () => backend.search(req.q, req.num));
    return c.json(serperResponse(req.q, req.num, hits));
  };
