import { mkdir } from "node:fs/promises";
import path from "node:path";
import { z } from "zod";
import type { SftSequence } from "../../model/index.js";
import { writeCurvesReport } from "../report.js";
import { Checkpoints, MetricsLog, readJson, STATE_FILE, writeJsonAtomic } from "../run-folder.js";
import { lrAt } from "../schedule.js";
import type { TrainerClient } from "../trainer-client.js";
import { epochBatches, packInOrder, splitHoldout } from "./batches.js";
import { SftConfig, type SftConfigInput } from "./config.js";
import { type BadLine, loadSftData, resolveTrajectoryFile, type SftExample } from "./data.js";

/** Where the data stream stands: the next step's epoch and batch index within that epoch. */
export const SftState = z.object({
  kind: z.literal("sft"),
  step: z.number().int().nonnegative(),
  epoch: z.number().int().nonnegative(),
  batchIndex: z.number().int().nonnegative(),
  totalSteps: z.number().int().positive(),
});
export type SftState = z.infer<typeof SftState>;

export interface SftStepMetrics {
  step: number;
  epoch: number;
  loss: number;
  tokens: number;
  sequences: number;
  grad_norm: number;
  lr: number;
  tokens_per_s: number;
  eval_loss?: number;
}

export interface SftRunOptions {
  signal?: AbortSignal;
  onStep?: (m: SftStepMetrics, totalSteps: number) => void;
  onBadLine?: (bad: BadLine) => void;
}

export interface SftSummary {
  runDir: string;
  steps: number;
  resumedFromStep: number | null;
  lastLoss: number | null;
  evalLoss: number | null;
  checkpoint: string;
  examples: { train: number; eval: number; bad: number; dropped: number; truncated: number };
}

const toSequence = (ex: SftExample): SftSequence => ({ input_ids: ex.inputIds, loss_mask: ex.lossMask });

/**
 * Supervised fine-tuning on native trajectories. Resumable: a run folder with a checkpoint picks up
 * at the step after it with the same data order (a function of seed and epoch) and learning rate.
 */
export async function runSft(
  input: SftConfigInput,
  client: TrainerClient,
  opts: SftRunOptions = {},
): Promise<SftSummary> {
  const config = SftConfig.parse(input);
  const runDir = path.resolve(config.out);
  await mkdir(runDir, { recursive: true });
  await writeJsonAtomic(path.join(runDir, "config.json"), config);

  const file = await resolveTrajectoryFile(config.data);
  const data = await loadSftData(file, { maxLength: config.maxLength, overlong: config.overlong });
  for (const bad of data.bad) opts.onBadLine?.(bad);
  if (data.examples.length === 0) throw new Error(`${file}: no usable trajectories`);
  const foreign = data.tokenizers.filter((t) => t !== client.tokenizer);
  if (foreign.length)
    throw new Error(
      `${file}: trajectories tokenized with ${foreign.join(", ")}, but the model uses ${client.tokenizer}; ` +
        "distill again with the model's tokenizer, or train a fresh preset on this data",
    );
  const lengths = data.examples.map((e) => e.inputIds.length);
  const split = splitHoldout(data.examples.length, config.evalFraction, config.seed, config.maxEvalExamples);
  const batchesOf = memoEpochs((epoch) =>
    epochBatches(split.train, lengths, { batchTokens: config.batchTokens, seed: config.seed, epoch }),
  );
  const evalBatches = packInOrder(split.eval, lengths, config.batchTokens);

  const checkpoints = new Checkpoints(runDir, config.keepCheckpoints);
  const metrics = new MetricsLog(path.join(runDir, "metrics.jsonl"));
  let state: SftState;
  let resumedFromStep: number | null = null;
  const latest = await checkpoints.latest();
  if (latest) {
    state = await readJson(path.join(latest, STATE_FILE), SftState);
    await client.loadCheckpoint(latest);
    resumedFromStep = state.step;
  } else {
    const totalSteps =
      config.steps ??
      Array.from({ length: config.epochs }, (_, e) => batchesOf(e).length).reduce((a, b) => a + b);
    state = { kind: "sft", step: 0, epoch: 0, batchIndex: 0, totalSteps };
  }
  await metrics.truncateFrom(state.step);
  const schedule = {
    lr: config.lr,
    minLrRatio: config.minLrRatio,
    totalSteps: state.totalSteps,
    warmupSteps: Math.floor(config.warmupRatio * state.totalSteps),
  };

  const evalLoss = async (): Promise<number | null> => {
    if (!evalBatches.length) return null;
    let weighted = 0;
    let tokens = 0;
    for (const b of evalBatches) {
      const r = await client.evalSft({ batch: b.map((i) => toSequence(data.examples[i])) });
      weighted += r.loss * r.tokens;
      tokens += r.tokens;
    }
    return tokens ? weighted / tokens : null;
  };

  let lastLoss: number | null = null;
  let lastEval: number | null = null;
  let checkpoint = latest ?? "";
  while (state.step < state.totalSteps) {
    opts.signal?.throwIfAborted();
    let batches = batchesOf(state.epoch);
    if (state.batchIndex >= batches.length) {
      state = { ...state, epoch: state.epoch + 1, batchIndex: 0 };
      batches = batchesOf(state.epoch);
    }
    const batch = batches[state.batchIndex].map((i) => toSequence(data.examples[i]));
    const r = await client.trainSft({ batch, lr: lrAt(state.step, schedule) });
    const m: SftStepMetrics = {
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
    if (config.evalEvery > 0 && (state.step % config.evalEvery === 0 || last)) {
      lastEval = await evalLoss();
      if (lastEval !== null) m.eval_loss = lastEval;
    }
    await metrics.append({ ...m });
    opts.onStep?.(m, state.totalSteps);
    if (state.step % config.checkpointEvery === 0 || last) {
      checkpoint = await checkpoints.save(client, state.step, state);
    }
  }
  const summary: SftSummary = {
    runDir,
    steps: state.step,
    resumedFromStep,
    lastLoss,
    evalLoss: lastEval,
    checkpoint,
    examples: {
      train: split.train.length,
      eval: split.eval.length,
      bad: data.bad.length,
      dropped: data.dropped,
      truncated: data.truncated,
    },
  };
  await writeCurvesReport(runDir, "SFT run", await metrics.read(), SFT_CURVES, [
    ["data", file],
    ["steps", summary.steps],
    ["examples (train / eval / bad / dropped / truncated)", Object.values(summary.examples).join(" / ")],
    ["last loss", lastLoss?.toFixed(4) ?? "-"],
    ["eval loss", lastEval?.toFixed(4) ?? "-"],
    ["checkpoint", checkpoint],
  ]);
  return summary;
}

const SFT_CURVES = [
  { file: "loss.svg", title: "loss", keys: ["loss", "eval_loss"] },
  { file: "lr.svg", title: "learning rate", keys: ["lr"] },
];

function memoEpochs(make: (epoch: number) => number[][]): (epoch: number) => number[][] {
  const cache = new Map<number, number[][]>();
  return (epoch) => {
    let v = cache.get(epoch);
    if (!v) {
      v = make(epoch);
      cache.set(epoch, v);
      if (cache.size > 2) cache.delete(cache.keys().next().value!);
    }
    return v;
  };
}
