import path from "node:path";
import { z } from "zod";
import type { SftSequence } from "../model/index.js";
import { Checkpoints, METRICS_FILE, MetricsLog, readJson, STATE_FILE } from "./run-folder.js";
import { lrAt } from "./schedule.js";
import type { TrainerClient } from "./trainer-client.js";

/**
 * Where a next-token training run's data stream stands: the next step's epoch and batch index
 * within that epoch. `kind` names the trainer, so one never resumes another's run folder.
 */
export const StepState = z.object({
  kind: z.string(),
  step: z.number().int().nonnegative(),
  epoch: z.number().int().nonnegative(),
  batchIndex: z.number().int().nonnegative(),
  totalSteps: z.number().int().positive(),
});
export type StepState = z.infer<typeof StepState>;

/** One step's record in metrics.jsonl; held-out losses (`eval_…`) on the steps that measure them. */
export interface StepMetrics {
  step: number;
  epoch: number;
  loss: number;
  tokens: number;
  sequences: number;
  grad_norm: number;
  lr: number;
  tokens_per_s: number;
  eval_loss?: number;
  [evalKey: `eval_${string}`]: number | undefined;
  /** What a probe measured by running the model (e.g. `dev_success`), on the steps it runs. */
  [probeKey: `dev_${string}`]: number | undefined;
}

/**
 * Measures the model as it trains by using it (an agent on dev tasks, say) rather than by a loss:
 * run after the step whose number is a multiple of `every`, and after the last.
 */
export interface StepProbe {
  every: number;
  run: (step: number) => Promise<Record<`dev_${string}`, number>>;
}

/** The batches of each epoch: pure functions of (epoch, index), which is what makes resume exact. */
export interface BatchSource {
  count(epoch: number): number;
  at(epoch: number, index: number): SftSequence[];
}

/**
 * Caches what `make` builds for an epoch, keeping the last two: the loop asks for the current epoch
 * many times and crosses into the next one once.
 */
export function memoEpochs<T>(make: (epoch: number) => T): (epoch: number) => T {
  const cache = new Map<number, T>();
  return (epoch) => {
    if (!cache.has(epoch)) {
      cache.set(epoch, make(epoch));
      if (cache.size > 2) cache.delete(cache.keys().next().value!);
    }
    return cache.get(epoch)!;
  };
}

export interface StepLoopSpec {
  kind: string;
  runDir: string;
  /** Peak rate, floor as a fraction of it, warmup as a fraction of all steps (see schedule.ts). */
  schedule: { lr: number; minLrRatio: number; warmupRatio: number };
  /** The steps of a fresh run; a resumed run keeps the total its state recorded. */
  totalSteps: () => number;
  batches: BatchSource;
  /** Held-out sets by metric name (e.g. `eval_loss`), each measured every `evalEvery` steps and at the end. */
  evals: Record<`eval_${string}`, SftSequence[][]>;
  evalEvery: number;
  checkpointEvery: number;
  keepCheckpoints: number;
}

export interface StepLoopOptions {
  probe?: StepProbe;
  signal?: AbortSignal;
  onStep?: (m: StepMetrics, totalSteps: number) => void;
}

export interface StepLoopResult {
  steps: number;
  resumedFromStep: number | null;
  lastLoss: number | null;
  /** The last value of each held-out set (null when never measured or empty). */
  evals: Record<string, number | null>;
  checkpoint: string;
  /** Every step's record, as metrics.jsonl holds them now. */
  records: Array<{ step: number } & Record<string, number>>;
}

/** The token-weighted mean loss over held-out batches (engine `/eval/sft`, no weight change). */
export async function heldOutLoss(client: TrainerClient, batches: SftSequence[][]): Promise<number | null> {
  let weighted = 0;
  let tokens = 0;
  for (const batch of batches) {
    const r = await client.evalSft({ batch });
    weighted += r.loss * r.tokens;
    tokens += r.tokens;
  }
  return tokens ? weighted / tokens : null;
}

/**
 * The step loop SFT and pretraining share: one engine `/train/sft` step per batch with the
 * scheduled learning rate, held-out losses, checkpoints with the state, and resume from the run
 * folder's last checkpoint (its metric records at or after that step are dropped and redone).
 */
export async function runStepLoop(
  spec: StepLoopSpec,
  client: TrainerClient,
  opts: StepLoopOptions = {},
): Promise<StepLoopResult> {
  const checkpoints = new Checkpoints(spec.runDir, spec.keepCheckpoints);
  const metrics = new MetricsLog(path.join(spec.runDir, METRICS_FILE));
  let state: StepState;
  let resumedFromStep: number | null = null;
  const latest = await checkpoints.latest();
  if (latest) {
    state = await readJson(path.join(latest, STATE_FILE), StepState);
    if (state.kind !== spec.kind)
      throw new Error(
        `${latest}: a checkpoint of a ${state.kind} run, not ${spec.kind}; choose another --out`,
      );
    await client.loadCheckpoint(latest);
    resumedFromStep = state.step;
  } else {
    state = { kind: spec.kind, step: 0, epoch: 0, batchIndex: 0, totalSteps: spec.totalSteps() };
  }
  await metrics.truncateFrom(state.step);
  const schedule = {
    lr: spec.schedule.lr,
    minLrRatio: spec.schedule.minLrRatio,
    totalSteps: state.totalSteps,
    warmupSteps: Math.floor(spec.schedule.warmupRatio * state.totalSteps),
  };

  let lastLoss: number | null = null;
  const evals: Record<string, number | null> = Object.fromEntries(
    Object.keys(spec.evals).map((k) => [k, null]),
  );
  let checkpoint = latest ?? "";
  while (state.step < state.totalSteps) {
    opts.signal?.throwIfAborted();
    if (state.batchIndex >= spec.batches.count(state.epoch))
      state = { ...state, epoch: state.epoch + 1, batchIndex: 0 };
    const batch = spec.batches.at(state.epoch, state.batchIndex);
    const r = await client.trainSft({ batch, lr: lrAt(state.step, schedule) });
    const m: StepMetrics = {
      step: state.step,
      epoch: state.epoch,
      loss: r.loss,
      tokens: r.tokens,
      sequences: batch.length,
      grad_norm: r.grad_norm,
      lr: r.lr,
      tokens_per_s: r.tokens_per_s,
    };
    lastLoss = r.loss;
    state = { ...state, step: state.step + 1, batchIndex: state.batchIndex + 1 };
    const last = state.step === state.totalSteps;
    if (spec.evalEvery > 0 && (state.step % spec.evalEvery === 0 || last)) {
      for (const [key, batches] of Object.entries(spec.evals) as [`eval_${string}`, SftSequence[][]][]) {
        const loss = batches.length ? await heldOutLoss(client, batches) : null;
        evals[key] = loss;
        if (loss !== null) m[key] = loss;
      }
    }
    if (opts.probe && (state.step % opts.probe.every === 0 || last))
      Object.assign(m, await opts.probe.run(state.step));
    await metrics.append({ ...m });
    opts.onStep?.(m, state.totalSteps);
    if (state.step % spec.checkpointEvery === 0 || last) {
      checkpoint = await checkpoints.save(client, state.step, state);
    }
  }
  return { steps: state.step, resumedFromStep, lastLoss, evals, checkpoint, records: await metrics.read() };
}
