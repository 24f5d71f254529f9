import { mkdir } from "node:fs/promises";
import path from "node:path";
import { z } from "zod";
import type { SftSequence } from "../../model/index.js";
import { writeCurvesReport } from "../report.js";
import { writeJsonAtomic } from "../run-folder.js";
import { memoEpochs, runStepLoop, type StepLoopOptions, type StepMetrics, StepState } from "../step-loop.js";
import type { TrainerClient } from "../trainer-client.js";
import { epochBatches, packInOrder, splitHoldout } from "./batches.js";
import { SftConfig, type SftConfigInput } from "./config.js";
import { type BadLine, loadSftData, resolveTrajectoryFile, type SftExample } from "./data.js";

/** Where the data stream stands: the next step's epoch and batch index within that epoch. */
export const SftState = StepState.extend({ kind: z.literal("sft") });
export type SftState = z.infer<typeof SftState>;

export type SftStepMetrics = StepMetrics;

export interface SftRunOptions extends StepLoopOptions {
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

  const loop = await runStepLoop(
    {
      kind: "sft",
      runDir,
      schedule: config,
      totalSteps: () =>
        config.steps ??
        Array.from({ length: config.epochs }, (_, e) => batchesOf(e).length).reduce((a, b) => a + b),
      batches: {
        count: (epoch) => batchesOf(epoch).length,
        at: (epoch, index) => batchesOf(epoch)[index].map((i) => toSequence(data.examples[i])),
      },
      evals: { eval_loss: evalBatches.map((b) => b.map((i) => toSequence(data.examples[i]))) },
      evalEvery: config.evalEvery,
      checkpointEvery: config.checkpointEvery,
      keepCheckpoints: config.keepCheckpoints,
    },
    client,
    opts,
  );
  const summary: SftSummary = {
    runDir,
    steps: loop.steps,
    resumedFromStep: loop.resumedFromStep,
    lastLoss: loop.lastLoss,
    evalLoss: loop.evals.eval_loss,
    checkpoint: loop.checkpoint,
    examples: {
      train: split.train.length,
      eval: split.eval.length,
      bad: data.bad.length,
      dropped: data.dropped,
      truncated: data.truncated,
    },
  };
  await writeCurvesReport(runDir, "SFT run", loop.records, SFT_CURVES, [
    ["data", file],
    ["steps", summary.steps],
    ["examples (train / eval / bad / dropped / truncated)", Object.values(summary.examples).join(" / ")],
    ["last loss", summary.lastLoss?.toFixed(4) ?? "-"],
    ["eval loss", summary.evalLoss?.toFixed(4) ?? "-"],
    ["checkpoint", summary.checkpoint],
  ]);
  return summary;
}

const SFT_CURVES = [
  { file: "loss.svg", title: "loss", keys: ["loss", "eval_loss"] },
  { file: "lr.svg", title: "learning rate", keys: ["lr"] },
  {
    file: "dev.svg",
    title: "dev tasks (when probed)",
    keys: ["dev_success", "dev_entity_copy", "dev_value_copy"],
  },
];
