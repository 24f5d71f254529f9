import { z } from "zod";
import { normalizeQuery, type ToolTag } from "../protocol/index.js";
import { guardTool } from "./guard.js";
import { formatHits } from "./search-results.js";
import { type Tool, ToolArgsError } from "./types.js";
import type { SearchBackend } from "./web-search.js";

export const MAX_QUERY_CHARS = 500;

export const SearchArgs = z.object({ query: z.string().min(1).max(MAX_QUERY_CHARS) });
export type SearchArgs = z.infer<typeof SearchArgs>;

/** A search tool (`web_search` or `wiki_search`): one query in, numbered title/url/snippet lines out. */
export function createSearchTool(tag: ToolTag, backend: SearchBackend, topK: number): Tool<SearchArgs> {
  return {
    tag,
    description: `Search ${tag === "wiki_search" ? "the encyclopedia corpus" : "the web"}; returns the top ${topK} results.`,
    argsSchema: SearchArgs,
    parseArgs(raw) {
      const query = normalizeQuery(raw);
      if (query === "") {
        throw new ToolArgsError(
          `Empty search query. Write what to look for between the tags: <${tag}>your query</${tag}>.`,
        );
      }
      if (query.length > MAX_QUERY_CHARS) {
        throw new ToolArgsError(
          `Search query too long (${query.length} characters). Use a few keywords, under ${MAX_QUERY_CHARS} characters.`,
        );
      }
      return { query };
    },
    run(args, ctx) {
      return guardTool(ctx, async (signal) => {
        const hits = await backend.search(args.query, topK, signal);
        return { ok: true, text: formatHits(args.query, hits) };
      });
    },
  };
}
