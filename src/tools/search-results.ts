import { SNIPPET_CHARS } from "./snippet.js";

/** One search result as the model sees it. */
export interface SearchHit {
  title: string;
  url?: string;
  snippet: string;
}

/** Collapses whitespace and cuts a provider's snippet to the snippet budget. */
export function clipSnippet(text: string, maxChars = SNIPPET_CHARS): string {
  const flat = text.replace(/\s+/g, " ").trim();
  if (flat.length <= maxChars) return flat;
  const cut = flat.lastIndexOf(" ", maxChars - 1);
  return `${flat.slice(0, cut > maxChars / 2 ? cut : maxChars - 1)}…`;
}

/**
 * Numbered results, one title line and one indented snippet line each:
 *
 *     1. Title (url)
 *        snippet
 */
export function formatHits(query: string, hits: readonly SearchHit[]): string {
  if (hits.length === 0) return `No results for "${query}".`;
  return hits
    .map((h, i) => {
      const head = `${i + 1}. ${h.title || "(untitled)"}${h.url ? ` (${h.url})` : ""}`;
      return h.snippet ? `${head}\n   ${h.snippet}` : head;
    })
    .join("\n");
}
