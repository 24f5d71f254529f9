import { termPositions } from "./terms.js";

/** Snippets stay short: every character of an observation is sequence length the model pays for. */
export const SNIPPET_CHARS = 200;

// A sentence ends at . ! or ? followed by space and an upper-case letter, digit or quote, or at a newline.
const SENTENCE_BREAK = /(?<=[.!?])\s+(?=[\p{Lu}\p{N}"'“(])|\s*\n+\s*/u;

function sentenceScore(sentence: string, queryTerms: ReadonlySet<string>): number {
  const matched = new Set<string>();
  let hits = 0;
  for (const { term } of termPositions(sentence)) {
    if (queryTerms.has(term)) {
      matched.add(term);
      hits += 1;
    }
  }
  // Covering more distinct query terms beats repeating one.
  return matched.size * 100 + hits;
}

function firstMatchIndex(text: string, queryTerms: ReadonlySet<string>): number {
  return termPositions(text).find((p) => queryTerms.has(p.term))?.index ?? 0;
}

/** Cuts `text` to at most `maxChars` around its first query match, on word boundaries, marking cuts with …. */
function windowAround(text: string, queryTerms: ReadonlySet<string>, maxChars: number): string {
  if (text.length <= maxChars) return text;
  const budget = maxChars - 2;
  let start = Math.max(0, firstMatchIndex(text, queryTerms) - Math.floor(budget / 3));
  start = Math.min(start, text.length - budget);
  if (start > 0) {
    const space = text.indexOf(" ", start);
    start = space === -1 || space - start > 20 ? start : space + 1;
  }
  let end = Math.min(text.length, start + budget);
  if (end < text.length) {
    const space = text.lastIndexOf(" ", end);
    end = space > start + budget / 2 ? space : end;
  }
  return `${start > 0 ? "…" : ""}${text.slice(start, end).trim()}${end < text.length ? "…" : ""}`;
}

/**
 * The most query-relevant sentence of `text` (two when the best one is short), cut to about
 * `maxChars` around the first query match.
 */
export function bestSnippet(text: string, queryTerms: ReadonlySet<string>, maxChars = SNIPPET_CHARS): string {
  const sentences = text
    .split(SENTENCE_BREAK)
    .map((s) => s.replace(/\s+/g, " ").trim())
    .filter((s) => s.length > 0);
  if (sentences.length === 0) return "";
  let best = 0;
  let bestScore = -1;
  sentences.forEach((s, i) => {
    const score = sentenceScore(s, queryTerms);
    if (score > bestScore) {
      best = i;
      bestScore = score;
    }
  });
  let snippet = sentences[best];
  if (snippet.length < maxChars * 0.6 && best + 1 < sentences.length) {
    snippet = `${snippet} ${sentences[best + 1]}`;
  }
  return windowAround(snippet, queryTerms, maxChars);
}
