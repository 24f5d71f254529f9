import { mkdir, writeFile } from "node:fs/promises";
import path from "node:path";
import { TOKENIZER_FILE, type Tokenizer } from "../../model/index.js";
import { writeCurvesReport } from "../report.js";
import { writeJsonAtomic } from "../run-folder.js";
import { runStepLoop, type StepLoopOptions } from "../step-loop.js";
import type { TrainerClient } from "../trainer-client.js";
import { PretrainConfig, type PretrainConfigInput } from "./config.js";
import { type PretrainCorpus, pretrainCorpus } from "./corpus.js";
import { type PretrainData, pretrainText } from "./data.js";
import type { Fertility } from "./fertility.js";

export interface PretrainRunOptions extends StepLoopOptions {
  /** Told what the text is (tokens, fertility) before the first step. */
  onData?: (data: PretrainData) => void;
}

export interface PretrainSummary {
  runDir: string;
  steps: number;
  resumedFromStep: number | null;
  lastLoss: number | null;
  evalLoss: number | null;
  copyLoss: number | null;
  readLoss: number | null;
  numberLoss: number | null;
  checkpoint: string;
  data: PretrainData;
}

/**
 * Next-token pretraining of a base model on generated worlds' text (`pretrainText`: documents packed
 * end to end, loss on every token). The order of each pass is a function of (seed, epoch), so a
 * killed run resumes with the same steps, as SFT does. The client's vocabulary
 * must be `tokenizer`'s (the CLI learns it first, then starts the engine with it).
 */
export async function runPretrain(
  input: PretrainConfigInput,
  client: TrainerClient,
  deps: { tokenizer: Tokenizer; corpus?: PretrainCorpus },
  opts: PretrainRunOptions = {},
): Promise<PretrainSummary> {
  const config = PretrainConfig.parse(input);
  const tok = deps.tokenizer;
  if (tok.name !== client.tokenizer)
    throw new Error(`the data would be tokenized with ${tok.name}, but the model uses ${client.tokenizer}`);
  const runDir = path.resolve(config.out);
  await mkdir(runDir, { recursive: true });
  await writeJsonAtomic(path.join(runDir, "config.json"), config);
  // Beside the checkpoints, so `coa distill --tokenizer <run>/tokenizer.json` writes data in the base's ids.
  await writeFile(path.join(runDir, TOKENIZER_FILE), `${JSON.stringify(tok)}\n`);

  const text = pretrainText(config, tok, deps.corpus ?? pretrainCorpus(config));
  const data = text.data;
  await writeJsonAtomic(path.join(runDir, "data.json"), data);
  opts.onData?.(data);

  const loop = await runStepLoop(
    {
      kind: "pretrain",
      runDir,
      schedule: config,
      totalSteps: () => config.steps,
      batches: text.batches,
      evals: text.evals,
      evalEvery: config.evalEvery,
      checkpointEvery: config.checkpointEvery,
      keepCheckpoints: config.keepCheckpoints,
    },
    client,
    opts,
  );
  const summary: PretrainSummary = {
    runDir,
    steps: loop.steps,
    resumedFromStep: loop.resumedFromStep,
    lastLoss: loop.lastLoss,
    evalLoss: loop.evals.eval_loss,
    copyLoss: loop.evals.eval_copy_loss,
    readLoss: loop.evals.eval_read_loss,
    numberLoss: loop.evals.eval_number_loss,
    checkpoint: loop.checkpoint,
    data,
  };
  const f = (x: Fertility) =>
    `${x.tokensPerChar.toFixed(3)} tokens/char, ${x.tokensPerName.toFixed(2)} tokens/name`;
  await writeCurvesReport(runDir, "Pretraining run", loop.records, PRETRAIN_CURVES, [
    ["worlds", `train ${data.worlds.train.join(", ")}; held out ${data.worlds.eval}`],
    ["tokenizer", `${tok.name} (${tok.vocabSize} tokens)`],
    ["fertility on the training worlds", f(data.fertility.train)],
    ["fertility on the held-out world (unseen by the tokenizer)", f(data.fertility.heldOut)],
    [
      "documents per pass",
      Object.entries(data.documents)
        .map(([k, v]) => `${k} ${v.documents} (${v.tokens} tokens)`)
        .join(", "),
    ],
    [
      "one pass",
      `${data.epoch.tokens} tokens = ${data.epoch.steps} steps of ${data.epoch.sequencesPerStep} × ${config.maxLength}`,
    ],
    ["steps", summary.steps],
    ["last loss", summary.lastLoss?.toFixed(4) ?? "-"],
    ["held-out loss", summary.evalLoss?.toFixed(4) ?? "-"],
    [`held-out copy loss (${data.eval.copyTokens} copied tokens)`, summary.copyLoss?.toFixed(4) ?? "-"],
    [
      `held-out read loss (${data.eval.readTokens} values read out of search results)`,
      summary.readLoss?.toFixed(4) ?? "-",
    ],
    [
      `held-out number loss (${data.eval.numberTokens} numbers copied in computations)`,
      summary.numberLoss?.toFixed(4) ?? "-",
    ],
    ["checkpoint", summary.checkpoint],
  ]);
  return summary;
}

const PRETRAIN_CURVES = [
  {
    file: "loss.svg",
    title: "loss",
    keys: ["loss", "eval_loss", "eval_copy_loss", "eval_read_loss", "eval_number_loss"],
  },
  { file: "lr.svg", title: "learning rate", keys: ["lr"] },
];
