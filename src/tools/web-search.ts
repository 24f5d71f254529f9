import { z } from "zod";
import { ToolFailure } from "./guard.js";
import { fetchOrFail, httpFailure, USER_AGENT } from "./http.js";
import { clipSnippet, type SearchHit } from "./search-results.js";

/** Where search results come from: the local BM25 index or a web search API. */
export interface SearchBackend {
  search(query: string, k: number, signal: AbortSignal): Promise<SearchHit[]>;
}

const SerperResponse = z.object({
  organic: z
    .array(z.object({ title: z.string(), link: z.string(), snippet: z.string().optional() }))
    .default([]),
});

const SearxngResponse = z.object({
  results: z
    .array(z.object({ title: z.string(), url: z.string(), content: z.string().nullish() }))
    .default([]),
});

async function readJson<T>(what: string, res: Response, schema: z.ZodType<T>): Promise<T> {
  if (!res.ok) throw httpFailure(what, res);
  let body: unknown;
  try {
    body = await res.json();
  } catch {
    throw new ToolFailure("bad_response", `${what} returned a body that is not JSON`);
  }
  const parsed = schema.safeParse(body);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    throw new ToolFailure(
      "bad_response",
      `${what} returned unexpected JSON at ${issue.path.join(".")}: ${issue.message}`,
    );
  }
  return parsed.data;
}

/** Google results through Serper: `POST <baseUrl>/search` with the key in `X-API-KEY`. */
export function serperBackend(opts: { apiKey: string; baseUrl?: string }): SearchBackend {
  const endpoint = `${(opts.baseUrl ?? "https://google.serper.dev").replace(/\/+$/, "")}/search`;
  return {
    async search(query, k, signal) {
      const res = await fetchOrFail("Web search (Serper)", endpoint, {
        method: "POST",
        headers: { "X-API-KEY": opts.apiKey, "Content-Type": "application/json", "User-Agent": USER_AGENT },
        body: JSON.stringify({ q: query, num: k }),
        signal,
      });
      const { organic } = await readJson("Web search (Serper)", res, SerperResponse);
      return organic
        .slice(0, k)
        .map((r) => ({ title: r.title, url: r.link, snippet: clipSnippet(r.snippet ?? "") }));
    },
  };
}

/** A SearXNG instance's JSON API: `GET <baseUrl>/search?q=…&format=json` (json must be enabled there). */
export function searxngBackend(opts: { baseUrl: string }): SearchBackend {
  const base = opts.baseUrl.replace(/\/+$/, "");
  return {
    async search(query, k, signal) {
      const url = `${base}/search?${new URLSearchParams({ q: query, format: "json" })}`;
      const res = await fetchOrFail("Web search (SearXNG)", url, {
        headers: { Accept: "application/json", "User-Agent": USER_AGENT },
        signal,
      });
      const { results } = await readJson("Web search (SearXNG)", res, SearxngResponse);
      return results
        .slice(0, k)
        .map((r) => ({ title: r.title, url: r.url, snippet: clipSnippet(r.content ?? "") }));
    },
  };
}
