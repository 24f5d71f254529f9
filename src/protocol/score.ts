/**
 * The score a double check ends with, on a 1–`max` scale (5 in this project's dialect, 4 in AFM's;
 * `max` is at most 9). Accepts "Score: 4", "score 4/5", "**Score**: 4", "4 out of 5" and, as a last
 * resort, a bare digit that ends the text ("... looks right. 4"). Later mentions win, so a verifier
 * that revises its score is read by its final word. Returns null when no score on the scale is found.
 */
export function parseScore(text: string, max = 5): number | null {
  const digit = `[1-${max}]`;
  const labelled = lastMatch(
    new RegExp(`score\\W{0,4}(?:is|of|=)?\\W{0,4}(${digit})(?![\\d.]*\\d)(?:\\s*\\/\\s*${max})?`, "gi"),
    text,
  );
  if (labelled !== null) return labelled;
  const outOfMax = lastMatch(
    new RegExp(`(?<![\\d.])(${digit})\\s*(?:\\/|out of)\\s*${max}(?!\\d)`, "gi"),
    text,
  );
  if (outOfMax !== null) return outOfMax;
  const bare = new RegExp(`(?:^|[^\\d.])(${digit})[\\s.*)]*$`).exec(text);
  return bare ? Number(bare[1]) : null;
}

function lastMatch(pattern: RegExp, text: string): number | null {
  let score: number | null = null;
  for (const m of text.matchAll(pattern)) score = Number(m[1]);
  return score;
}
