import type { ModelClient } from "../model/index.js";
import type { Task } from "../tasks/index.js";
import { codeReward, type Sandbox } from "./code-reward.js";
import { LlmJudge } from "./judge.js";
import { mathEquivalent } from "./math-equivalence.js";
import { exactMatchReward, numericAnswerReward } from "./qa-reward.js";
import { type Score, scored, scoreError } from "./score.js";

export interface ScoreContext {
  /** Judge for web QA: a ready LlmJudge, or a model to judge with (one cached judge per model). */
  judge?: ModelClient | LlmJudge;
  /** Runs candidate programs for code tasks; defaults to the tools' Python sandbox. */
  sandbox?: Sandbox;
  signal?: AbortSignal;
}

const judges = new WeakMap<ModelClient, LlmJudge>();

function judgeOf(judge: ModelClient | LlmJudge): LlmJudge {
  if (judge instanceof LlmJudge) return judge;
  let made = judges.get(judge);
  if (!made) {
    made = new LlmJudge({ model: judge });
    judges.set(judge, made);
  }
  return made;
}

/** The scorer a task gets when it has no prediction to score. */
function scorerName(task: Task, ctx: ScoreContext): string {
  if (task.kind === "math" || task.kind === "code") return task.kind;
  return task.kind === "web_qa" && ctx.judge ? "judge" : "em";
}

async function judged(task: Task, prediction: string, judge: LlmJudge, signal?: AbortSignal): Promise<Score> {
  const outcome = await judge.judge({ question: task.question, golds: task.answers, prediction }, signal);
  if ("error" in outcome) return scoreError("judge", outcome.error);
  const { metrics } = exactMatchReward(prediction, task.answers);
  return scored("judge", outcome.verdict.correct, { ...metrics, cached: outcome.cached ? 1 : 0 });
}

/**
 * Scores a prediction for a task with the reward its kind calls for: math equivalence for math, the
 * sandboxed tests for code, an LLM judge for web QA when one is configured, and exact match (F1
 * recorded) otherwise, with numeric equality added for the generated world's computed answers.
 * A null prediction (no answer given) is wrong, not an error. Never throws: a scorer that cannot
 * decide returns `error`.
 */
export async function scoreTask(
  task: Task,
  prediction: string | null,
  ctx: ScoreContext = {},
): Promise<Score> {
  if (prediction === null) return scored(scorerName(task, ctx), false);
  try {
    switch (task.kind) {
      case "math":
        return scored(
          "math",
          task.answers.some((gold) => mathEquivalent(prediction, gold)),
        );
      case "code":
        return await codeReward(task, prediction, ctx.sandbox, ctx.signal);
      case "web_qa":
        return ctx.judge
          ? await judged(task, prediction, judgeOf(ctx.judge), ctx.signal)
          : exactMatchReward(prediction, task.answers);
      case "arithmetic":
      case "computation":
        return numericAnswerReward(prediction, task.answers);
      default:
        return exactMatchReward(prediction, task.answers);
    }
  } catch (err) {
    return scoreError(scorerName(task, ctx), `scorer failed: ${(err as Error).message}`);
  }
}
