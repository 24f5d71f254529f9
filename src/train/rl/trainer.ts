import { mkdir } from "node:fs/promises";
import path from "node:path";
import { z } from "zod";
import {
  type PolicySequence,
  type PolicyStepResult,
  prefixCacheCounters,
  prefixCacheDelta,
} from "../../model/index.js";
import type { Task } from "../../tasks/index.js";
import { mean } from "../../util/index.js";
import { writeCurvesReport } from "../report.js";
import {
  Checkpoints,
  METRICS_FILE,
  MetricsLog,
  readJson,
  STATE_FILE,
  writeJsonAtomic,
} from "../run-folder.js";
import { lrAt } from "../schedule.js";
import { deriveSeed, shuffled } from "../seeds.js";
import type { TrainerClient } from "../trainer-client.js";
import { groupAdvantages, isInformative } from "./advantages.js";
import { miniBatches, policySequence } from "./batch.js";
import { RlConfig, type RlConfigInput } from "./config.js";
import {
  type Detokenize,
  type Group,
  groupRewards,
  type RunEpisode,
  rolloutGroups,
  type ScoreAnswer,
} from "./rollout.js";

/** The next step and where the task stream stands (epoch over the task list and position in it). */
export const RlState = z.object({
  kind: z.literal("rl"),
  step: z.number().int().nonnegative(),
  epoch: z.number().int().nonnegative(),
  position: z.number().int().nonnegative(),
  totalSteps: z.number().int().positive(),
});
export type RlState = z.infer<typeof RlState>;

/** One line of an RL run's metrics.jsonl: what one GRPO step did. */
export const RlStepMetrics = z.object({
  step: z.number(),
  reward_mean: z.number(),
  score_mean: z.number(),
  success: z.number(),
  samples: z.number(),
  scorer_errors: z.number(),
  groups_drawn: z.number(),
  groups_kept: z.number(),
  rounds: z.number(),
  /** Kept sequences left out of the update for exceeding maxSequenceTokens. */
  too_long: z.number(),
  response_length: z.number(),
  turns: z.number(),
  tool_calls: z.number(),
  format_error_rate: z.number(),
  updates: z.number(),
  loss: z.number(),
  entropy: z.number(),
  clip_frac: z.number(),
  kl: z.number(),
  grad_norm: z.number(),
  lr: z.number(),
  rollout_s: z.number(),
  rollout_tokens_per_s: z.number(),
  update_s: z.number(),
  update_tokens_per_s: z.number(),
  /**
   * The engine's prefix cache over the step's rollouts (issue 18): hits and misses, prompt tokens
   * reused from earlier turns and computed. Absent where the engine keeps no cache or the readings
   * around the rollouts do not compare.
   */
  prefix_hits: z.number().optional(),
  prefix_misses: z.number().optional(),
  saved_prefill_tokens: z.number().optional(),
  prefill_tokens: z.number().optional(),
});
export type RlStepMetrics = z.infer<typeof RlStepMetrics>;

export interface RlDeps {
  client: TrainerClient;
  runEpisode: RunEpisode;
  score: ScoreAnswer;
  detokenize: Detokenize;
}

export interface RlRunOptions {
  signal?: AbortSignal;
  onStep?: (m: RlStepMetrics, totalSteps: number) => void;
}

export interface RlSummary {
  runDir: string;
  steps: number;
  resumedFromStep: number | null;
  checkpoint: string;
  last: RlStepMetrics | null;
}

/** Draws the next `count` tasks of a seeded per-epoch order, wrapping into the next epoch. */
export function drawTasks(
  tasks: readonly Task[],
  count: number,
  cursor: { epoch: number; position: number },
  seed: number,
): { drawn: Task[]; epoch: number; position: number } {
  let { epoch, position } = cursor;
  const orderOf = (e: number) => shuffled(tasks, deriveSeed(seed, "tasks", e));
  let order = orderOf(epoch);
  const drawn: Task[] = [];
  while (drawn.length < count) {
    if (position >= order.length) {
      epoch++;
      position = 0;
      order = orderOf(epoch);
    }
    drawn.push(order[position++]);
  }
  return { drawn, epoch, position };
}

/**
 * Agentic RL (GRPO with DAPO's dynamic sampling, clip-higher, token-mean loss and overlong
 * penalty). Every random choice of step k derives from (seed, k), so a run resumed from a
 * checkpoint repeats exactly the step the uninterrupted run would have taken.
 */
export async function runRl(
  input: RlConfigInput,
  tasks: readonly Task[],
  deps: RlDeps,
  opts: RlRunOptions = {},
): Promise<RlSummary> {
  const config = RlConfig.parse(input);
  if (tasks.length === 0) throw new Error(`${config.tasks}: no tasks`);
  const runDir = path.resolve(config.out);
  await mkdir(runDir, { recursive: true });
  await writeJsonAtomic(path.join(runDir, "config.json"), config);
  const checkpoints = new Checkpoints(runDir, config.keepCheckpoints);
  const metrics = new MetricsLog(path.join(runDir, METRICS_FILE));

  let state: RlState = { kind: "rl", step: 0, epoch: 0, position: 0, totalSteps: config.steps };
  let resumedFromStep: number | null = null;
  const latest = await checkpoints.latest();
  if (latest) {
    state = { ...(await readJson(path.join(latest, STATE_FILE), RlState)), totalSteps: config.steps };
    await deps.client.loadCheckpoint(latest);
    resumedFromStep = state.step;
  }
  await metrics.truncateFrom(state.step);
  const schedule = {
    lr: config.update.lr,
    minLrRatio: 1,
    warmupSteps: config.update.warmupSteps,
    totalSteps: config.steps,
  };

  let checkpoint = latest ?? "";
  let last: RlStepMetrics | null = null;
  while (state.step < state.totalSteps) {
    opts.signal?.throwIfAborted();
    const step = state.step;

    const cacheBefore = prefixCacheCounters(await deps.client.info());
    const rolloutStart = performance.now();
    const drawnGroups: Group[] = [];
    const kept: Group[] = [];
    let rounds = 0;
    do {
      const next = drawTasks(tasks, config.batchTasks - kept.length, state, config.seed);
      state = { ...state, epoch: next.epoch, position: next.position };
      const round = rounds;
      const groups = await rolloutGroups(next.drawn, deps, {
        config,
        seedOf: (slot, k) => deriveSeed(config.seed, "sample", step, round, slot, k),
        signal: opts.signal,
      });
      drawnGroups.push(...groups);
      for (const g of groups) {
        const rewards = groupRewards(g);
        if (config.dynamicSampling ? isInformative(rewards) : rewards.length > 0) kept.push(g);
      }
      rounds++;
    } while (config.dynamicSampling && kept.length < config.batchTasks && rounds <= config.maxRefills);
    const rolloutS = (performance.now() - rolloutStart) / 1000;
    const cache = prefixCacheDelta(cacheBefore, prefixCacheCounters(await deps.client.info()));

    const built: PolicySequence[] = kept.flatMap((g) => {
      const scored = g.samples.filter((s) => s.reward !== null);
      const adv = groupAdvantages(
        scored.map((s) => s.reward!),
        { normalizeStd: config.update.normalizeStd, negativeScale: config.update.negativeScale },
      );
      return scored.map((s, i) => policySequence(s.trajectory, adv[i], config.update.positiveMinProb));
    });
    const limit = config.maxSequenceTokens ?? Number.POSITIVE_INFINITY;
    const sequences = built.filter((s) => s.input_ids.length <= limit);

    const updateStart = performance.now();
    const lr = lrAt(step, schedule);
    const results: PolicyStepResult[] = [];
    for (let e = 0; e < config.update.epochs && sequences.length; e++) {
      for (const batch of miniBatches(
        sequences,
        config.update.miniBatchSize,
        deriveSeed(config.seed, "minibatch", step, e),
      )) {
        opts.signal?.throwIfAborted();
        results.push(
          await deps.client.trainPolicy({
            batch,
            lr,
            clip_low: config.update.clipLow,
            clip_high: config.update.clipHigh,
            agg: config.update.agg,
            kl_coef: config.update.klCoef,
            temperature: config.rollout.temperature,
          }),
        );
      }
    }
    const updateS = (performance.now() - updateStart) / 1000;

    const samples = drawnGroups.flatMap((g) => g.samples);
    const scored = samples.filter((s) => s.reward !== null);
    const modelTokens = samples.reduce((a, s) => a + s.trajectory.stats.modelTokens, 0);
    const updateTokens = sequences.reduce((a, s) => a + s.input_ids.length, 0) * config.update.epochs;
    const m: RlStepMetrics = {
      step,
      reward_mean: mean(scored.map((s) => s.reward!)),
      score_mean: mean(scored.map((s) => s.score!)),
      success: mean(scored.map((s) => (s.correct ? 1 : 0))),
      samples: samples.length,
      scorer_errors: samples.length - scored.length,
      groups_drawn: drawnGroups.length,
      groups_kept: kept.length,
      rounds,
      too_long: built.length - sequences.length,
      response_length: mean(samples.map((s) => s.responseLength)),
      turns: mean(samples.map((s) => s.trajectory.stats.turns)),
      tool_calls: mean(
        samples.map((s) => Object.values(s.trajectory.stats.toolCalls).reduce((a, b) => a + b, 0)),
      ),
      format_error_rate: mean(samples.map((s) => (s.formatOk ? 0 : 1))),
      updates: results.length,
      loss: mean(results.map((r) => r.loss)),
      entropy: mean(results.map((r) => r.entropy)),
      clip_frac: mean(results.map((r) => r.clip_frac)),
      kl: mean(results.map((r) => r.kl)),
      grad_norm: mean(results.map((r) => r.grad_norm)),
      lr,
      rollout_s: rolloutS,
      rollout_tokens_per_s: rolloutS > 0 ? modelTokens / rolloutS : 0,
      update_s: updateS,
      update_tokens_per_s: updateS > 0 && results.length ? updateTokens / updateS : 0,
      ...(cache && {
        prefix_hits: cache.hits,
        prefix_misses: cache.misses,
        saved_prefill_tokens: cache.saved_prefill_tokens,
        prefill_tokens: cache.prefill_tokens,
      }),
    };
    state = { ...state, step: step + 1 };
    await metrics.append({ ...m });
    last = m;
    opts.onStep?.(m, state.totalSteps);
    if (state.step % config.checkpointEvery === 0 || state.step === state.totalSteps) {
      checkpoint = await checkpoints.save(deps.client, state.step, state);
    }
  }
  const records = await metrics.read();
  const total = (key: string) => records.reduce((sum, r) => sum + (r[key] ?? 0), 0);
  const [saved, computed] = [total("saved_prefill_tokens"), total("prefill_tokens")];
  const reuse: Array<[string, string]> =
    saved + computed > 0
      ? [["rollout prompt tokens from the prefix cache", `${saved} of ${saved + computed}`]]
      : [];
  await writeCurvesReport(runDir, "RL run", records, RL_CURVES, [
    ["tasks", `${config.tasks} (${tasks.length})`],
    ["steps", state.step],
    ["last reward", last?.reward_mean.toFixed(3) ?? "-"],
    ["last success", last?.success.toFixed(3) ?? "-"],
    ...reuse,
    ["checkpoint", checkpoint],
  ]);
  return { runDir, steps: state.step, resumedFromStep, checkpoint, last };
}

const RL_CURVES = [
  { file: "reward.svg", title: "reward and success", keys: ["reward_mean", "success"] },
  { file: "groups.svg", title: "groups", keys: ["groups_drawn", "groups_kept"] },
  { file: "length.svg", title: "response length", keys: ["response_length"] },
  { file: "behaviour.svg", title: "turns, tool calls", keys: ["turns", "tool_calls"] },
  { file: "format.svg", title: "format error rate", keys: ["format_error_rate"] },
  { file: "policy.svg", title: "entropy, clip fraction, KL", keys: ["entropy", "clip_frac", "kl"] },
  { file: "grad.svg", title: "gradient norm", keys: ["grad_norm"] },
  { file: "speed.svg", title: "tokens/s", keys: ["rollout_tokens_per_s", "update_tokens_per_s"] },
  {
    file: "prefill.svg",
    title: "prompt tokens reused and computed",
    keys: ["saved_prefill_tokens", "prefill_tokens"],
  },
];
