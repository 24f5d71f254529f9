// How text becomes search terms: the same rules index documents, parse queries and pick snippets.

// Frequent English function words: they match nearly every document, so they cost query time and
// add nothing to a BM25 ranking.
const STOP_WORDS = new Set(
  (
    "a an and are as at be but by for from has have he her his i if in into is it its of on or our she " +
    "that the their them then there these they this to was were what when where which who whom why will " +
    "been being had also after before over under between during while " +
    "with you your do does did how not no so than too very can could would should about"
  ).split(" "),
);

const WORD = /[\p{L}\p{N}]+(?:['’][\p{L}]+)?/gu;
const COMBINING_MARKS = /\p{M}+/gu;

/** Splits text into raw words (letters and digits; an apostrophe suffix stays attached). */
export function tokenize(text: string): string[] {
  return text.match(WORD) ?? [];
}

/** Normalises one word to an index term: lowercase, accents stripped; null for stop words. */
export function processTerm(word: string): string | null {
  const term = word
    .toLowerCase()
    .normalize("NFD")
    .replace(COMBINING_MARKS, "")
    .replace(/['’]s$/, "");
  if (term.length === 0 || STOP_WORDS.has(term)) return null;
  return term;
}

/** Every index term of a text with the character index where its word starts. */
export function termPositions(text: string): Array<{ term: string; index: number }> {
  const out: Array<{ term: string; index: number }> = [];
  for (const m of text.matchAll(WORD)) {
    const term = processTerm(m[0]);
    if (term !== null) out.push({ term, index: m.index });
  }
  return out;
}

/** The distinct index terms of a text, in order of first appearance. */
export function termsOf(text: string): string[] {
  return [...new Set(termPositions(text).map((p) => p.term))];
}
