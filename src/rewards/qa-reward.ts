import { MATH_TOLERANCE } from "./math-equivalence.js";
import { expandGolds, type QaConvention, qaScores } from "./qa-metrics.js";
import { type Score, scored } from "./score.js";

/** Exact match decides; token F1 is recorded next to it. */
export function exactMatchReward(
  prediction: string,
  golds: readonly string[],
  convention?: QaConvention,
): Score {
  const { em, f1 } = qaScores(prediction, golds, convention);
  return scored("em", em === 1, { em, f1 });
}

function plainNumber(text: string): number | null {
  const t = text.trim().replace(/\.$/, "");
  if (!/^[-+]?(?:\d{1,3}(?:,\d{3})+|\d*)(?:\.\d+)?$/.test(t) || !/\d/.test(t)) return null;
  return Number(t.replaceAll(",", ""));
}

/**
 * For computed answers (generated-world arithmetic): exact match, or the same number written
 * differently ("12.0" vs "12", "1,234" vs "1234"), which SQuAD normalization would tell apart.
 */
export function numericAnswerReward(prediction: string, golds: readonly string[]): Score {
  const base = exactMatchReward(prediction, golds);
  const value = plainNumber(prediction);
  if (base.correct || value === null) return base;
  const same = expandGolds(golds).some((g) => {
    const gold = plainNumber(g);
    return gold !== null && Math.abs(gold - value) <= MATH_TOLERANCE * Math.max(1, Math.abs(gold));
  });
  return same ? { ...base, score: 1, correct: true, scorer: "em+numeric" } : base;
}
