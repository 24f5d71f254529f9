/**
 * The 1–5 score a double check ends with. Accepts "Score: 4", "score 4/5", "**Score**: 4", "4 out of 5" and, as a
 * last resort, a bare digit that ends the text ("... looks right. 4"). Later mentions win, so a
 * verifier that revises its score is read by its final word. Returns null when no score is found.
 */
export function parseScore(text: string): number | null {
  const labelled = lastMatch(/score\W{0,4}(?:is|of|=)?\W{0,4}([1-5])(?![\d.]*\d)(?:\s*\/\s*5)?/gi, text);
  if (labelled !== null) return labelled;
  const outOfFive = lastMatch(/(?<![\d.])([1-5])\s*(?:\/|out of)\s*5(?!\d)/gi, text);
  if (outOfFive !== null) return outOfFive;
  const bare = /(?:^|[^\d.])([1-5])[\s.*)]*$/.exec(text);
  return bare ? Number(bare[1]) : null;
}

function lastMatch(pattern: RegExp, text: string): number | null {
  let score: number | null = null;
  for (const m of text.matchAll(pattern)) score = Number(m[1]);
  return score;
}
