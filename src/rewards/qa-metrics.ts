/**
 * Exact match and token F1 as the official SQuAD v1.1 and HotpotQA evaluation scripts define them,
 * reproduced character for character in behaviour (not in code):
 * lowercase → drop ASCII punctuation (Python's string.punctuation only) → drop the words a/an/the
 * → collapse whitespace. Unicode is NOT normalized: "é" and "e\u0301" differ, "’" and "—" stay,
 * exactly as in the official scripts. Word boundaries and whitespace follow Python 3 `re`/`str.split`.
 */

const ASCII_PUNCTUATION = /[!"#$%&'()*+,\-./:;<=>?@[\\\]^_`{|}~]/g;
/** Python 3 `\b(a|an|the)\b` on str: a word character is a Unicode letter, number or underscore. */
const ARTICLES = /(?<![\p{L}\p{N}_])(?:a|an|the)(?![\p{L}\p{N}_])/gu;
/** What Python's str.split() splits on (str.isspace), which differs from JS \s (e.g. \x1c–\x1f, \x85, not \ufeff). */
const PY_WHITESPACE = /[\t\n\v\f\r\x1c-\x1f \x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]+/;

export function pythonSplit(text: string): string[] {
  return text.split(PY_WHITESPACE).filter((t) => t.length > 0);
}

export function normalizeAnswer(text: string): string {
  const lowered = text.toLowerCase();
  const noPunct = lowered.replace(ASCII_PUNCTUATION, "");
  const noArticles = noPunct.replace(ARTICLES, " ");
  return pythonSplit(noArticles).join(" ");
}

export function exactMatch(prediction: string, gold: string): number {
  return normalizeAnswer(prediction) === normalizeAnswer(gold) ? 1 : 0;
}

function overlapF1(predTokens: string[], goldTokens: string[]): number {
  const counts = new Map<string, number>();
  for (const t of goldTokens) counts.set(t, (counts.get(t) ?? 0) + 1);
  let same = 0;
  for (const t of predTokens) {
    const left = counts.get(t) ?? 0;
    if (left > 0) {
      same++;
      counts.set(t, left - 1);
    }
  }
  if (same === 0) return 0;
  const precision = same / predTokens.length;
  const recall = same / goldTokens.length;
  return (2 * precision * recall) / (precision + recall);
}

/** SQuAD v1.1 token F1 over the multiset of normalized tokens (0 when either side is empty). */
export function squadF1(prediction: string, gold: string): number {
  return overlapF1(pythonSplit(normalizeAnswer(prediction)), pythonSplit(normalizeAnswer(gold)));
}

const HOTPOT_SPECIAL = new Set(["yes", "no", "noanswer"]);

/** HotpotQA F1: like SQuAD, but a yes/no/noanswer on either side scores 0 unless both sides are identical. */
export function hotpotF1(prediction: string, gold: string): number {
  const pred = normalizeAnswer(prediction);
  const ref = normalizeAnswer(gold);
  if ((HOTPOT_SPECIAL.has(pred) || HOTPOT_SPECIAL.has(ref)) && pred !== ref) return 0;
  return overlapF1(pythonSplit(pred), pythonSplit(ref));
}

/**
 * Every accepted gold string: the list, with each entry split on `|` (a multi-answer gold such as
 * "NYC|New York City"). Empty alternatives are dropped unless nothing else is left.
 */
export function expandGolds(golds: readonly string[]): string[] {
  const parts = golds.flatMap((g) => g.split("|")).filter((g) => g.trim().length > 0);
  return parts.length > 0 ? parts : [...golds];
}

export type QaConvention = "squad" | "hotpot";

export interface QaScores {
  em: number;
  f1: number;
}

/** EM and F1 of a prediction, each the max over all golds (official `metric_max_over_ground_truths`). */
export function qaScores(
  prediction: string,
  golds: readonly string[],
  convention: QaConvention = "squad",
): QaScores {
  const all = expandGolds(golds);
  if (all.length === 0) return { em: 0, f1: 0 };
  const f1 = convention === "hotpot" ? hotpotF1 : squadF1;
  return {
    em: Math.max(...all.map((g) => exactMatch(prediction, g))),
    f1: Math.max(...all.map((g) => f1(prediction, g))),
  };
}
