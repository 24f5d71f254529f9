import { answerParts, type DialectName, dialectOf } from "../protocol/index.js";
import { type Score, type ScoreContext, scoreTask } from "../rewards/index.js";
import type { Task } from "../tasks/index.js";

/**
 * Scores an episode's answer as its dialect writes it. A task's golds are alternatives, as
 * everywhere in coa: any one of `task.answers` is accepted, and a gold written `A|B` accepts A or B
 * (`expandGolds`). An answer in a dialect that joins several answers with a separator (`afm-mhqa`:
 * `|`) is scored whole first (a name that holds the separator, `AC|DC`, still matches); failing
 * that, it is split on the separator and is correct only when every part is: listing a wrong
 * candidate beside the right one fails, so a list never buys a hedge. Each part is scored by the
 * task's own scorer (exact match, numeric, math, judge); one that cannot decide makes the whole
 * undecided. Dialects without a separator score the answer as written, exactly as `scoreTask`.
 */
export async function scoreDialectAnswer(
  task: Task,
  prediction: string | null,
  dialect: DialectName = "coa",
  ctx: ScoreContext = {},
): Promise<Score> {
  const whole = await scoreTask(task, prediction, ctx);
  if (prediction === null || whole.correct || whole.error !== null) return whole;
  const parts = dialectOf(dialect).answer.separator ? answerParts(prediction, dialect) : [];
  if (parts.length < 2) return whole;
  const scores = await Promise.all(parts.map((part) => scoreTask(task, part, ctx)));
  const undecided = scores.find((s) => s.error !== null);
  if (undecided) return undecided;
  const right = scores.filter((s) => s.correct).length;
  const correct = right === parts.length;
  return {
    score: correct ? 1 : 0,
    correct,
    error: null,
    scorer: `${scores[0]!.scorer}+parts`,
    metrics: { parts: parts.length, partsCorrect: right },
  };
}
