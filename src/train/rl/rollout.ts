import pLimit from "p-limit";
import { completionIds, type Trajectory } from "../../protocol/index.js";
import { formatReward } from "../../rewards/index.js";
import type { Task } from "../../tasks/index.js";
import { overlongPenalty } from "./advantages.js";
import type { RlConfig } from "./config.js";

/** Runs one episode of `task` with the given sampling seed (the runtime against the policy). */
export type RunEpisode = (task: Task, opts: { seed: number; signal?: AbortSignal }) => Promise<Trajectory>;

/** Scores a final answer; `error` set means the scorer failed, which is not a wrong answer. */
export type ScoreAnswer = (
  task: Task,
  prediction: string | null,
) => Promise<{ score: number; correct: boolean; error?: string | null }>;

/** What scoring needs besides the scorer: the text of a completion, from its ids. */
export type Detokenize = (ids: readonly number[]) => Promise<string>;

export interface ScoredSample {
  trajectory: Trajectory;
  /** Task score in [0, 1]; null when the scorer failed (the sample is then left out of training). */
  score: number | null;
  correct: boolean;
  scoreError: string | null;
  /** False when the runtime rejected a turn or the whole text breaks the protocol's rules. */
  formatOk: boolean;
  overlongPenalty: number;
  /** score − format penalty + overlong penalty; null when score is null. */
  reward: number | null;
  responseLength: number;
}

export interface Group {
  task: Task;
  samples: ScoredSample[];
}

/** Scored rewards of a group, scorer failures left out. */
export const groupRewards = (g: Group): number[] =>
  g.samples.flatMap((s) => (s.reward === null ? [] : [s.reward]));

export async function scoreSample(
  task: Task,
  trajectory: Trajectory,
  deps: { score: ScoreAnswer; detokenize: Detokenize },
  config: Pick<RlConfig, "reward" | "rollout">,
): Promise<ScoredSample> {
  const ids = completionIds(trajectory);
  const responseLength = ids.length;
  const formatOk =
    trajectory.stats.formatErrors === 0 &&
    formatReward(await deps.detokenize(ids), trajectory.profile, {
      complete: true,
      dialect: trajectory.dialect,
    }).correct;
  const overlong = config.reward.overlongPenalty
    ? overlongPenalty(responseLength, config.rollout.maxResponseTokens, config.reward.overlongBuffer)
    : 0;
  let result: Awaited<ReturnType<ScoreAnswer>>;
  try {
    result = await deps.score(task, trajectory.answer);
  } catch (err) {
    result = { score: 0, correct: false, error: err instanceof Error ? err.message : String(err) };
  }
  const scoreError = result.error ?? null;
  const base = scoreError === null ? result.score : null;
  const format = formatOk ? 0 : config.reward.formatWeight;
  return {
    trajectory,
    score: base,
    correct: scoreError === null && result.correct,
    scoreError,
    formatOk,
    overlongPenalty: overlong,
    reward: base === null ? null : base - format + overlong,
    responseLength,
  };
}

/**
 * `groupSize` episodes per task, run concurrently, returned in task then sample order whatever order
 * they finish in. `seedOf(slot, k)` gives the sampling seed of sample k of the slot-th task.
 */
export async function rolloutGroups(
  tasks: readonly Task[],
  deps: { runEpisode: RunEpisode; score: ScoreAnswer; detokenize: Detokenize },
  opts: {
    config: Pick<RlConfig, "reward" | "rollout" | "groupSize">;
    seedOf: (slot: number, k: number) => number;
    signal?: AbortSignal;
  },
): Promise<Group[]> {
  const limit = pLimit(opts.config.rollout.concurrency);
  return Promise.all(
    tasks.map(async (task, slot) => ({
      task,
      samples: await Promise.all(
        Array.from({ length: opts.config.groupSize }, (_, k) =>
          limit(async () => {
            const t = await deps.runEpisode(task, { seed: opts.seedOf(slot, k), signal: opts.signal });
            return scoreSample(task, t, deps, opts.config);
          }),
        ),
      ),
    })),
  );
}
