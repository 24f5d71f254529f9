import { mkdir, readFile, writeFile } from "node:fs/promises";
import path from "node:path";
import type { Command } from "commander";
import { z } from "zod";
import { Engine, EnginePreset, TOKENIZER_FILE } from "../../model/index.js";
import { scoreTask } from "../../rewards/index.js";
import { parseSeeds, WorldSize } from "../../tasks/index.js";
import { createToolset, prepareToolset } from "../../tools/index.js";
import {
  agentEpisodes,
  Checkpoints,
  dataTokenizerFile,
  type EngineRestartOptions,
  type Fertility,
  PretrainConfig,
  type PretrainConfigInput,
  parseMix,
  pretrainCorpus,
  pretrainTokenizer,
  RlConfig,
  type RlConfigInput,
  type RlStepMetrics,
  resolveTrajectoryFile,
  runPretrain,
  runRl,
  runSft,
  SftConfig,
  type SftConfigInput,
  withEngineRestarts,
} from "../../train/index.js";
import { taskGround } from "../corpus.js";
import { devProbe } from "../dev-probe.js";
import { addWebToolOptions, parseFlags, SEARCH_TOP_K_OPTION, SearchTopK, WebToolFlags } from "../flags.js";
import { itemProgress } from "../progress.js";
import { openWebTools } from "../web-tools.js";

const Int = z.coerce.number().int();
const Num = z.coerce.number();

/** The flags pretraining and SFT share: the model, the step loop and its run folder. */
const NextTokenFlags = z.object({
  out: z.string(),
  preset: EnginePreset,
  from: z.string().optional(),
  context: z.coerce.number().int().min(16).optional(),
  tokenizer: z.string().optional(),
  config: z.string().optional(),
  steps: Int.optional(),
  lr: Num.optional(),
  batchTokens: Int.optional(),
  maxLength: Int.optional(),
  evalEvery: Int.optional(),
  checkpointEvery: Int.optional(),
  seed: Int.optional(),
  threads: Int.optional(),
});

/** Flags of `coa train sft`; unset ones fall back to --config, then to SftConfig's defaults. */
export const SftFlags = NextTokenFlags.extend({
  data: z.string(),
  epochs: Int.optional(),
  devTasks: z.string().optional(),
  devLimit: Int.min(1).default(20),
  devEvery: Int.min(1).optional(),
  searchTopK: SearchTopK,
  maxTurns: Int.min(1).optional(),
  maxTokensPerTurn: Int.min(1).optional(),
});

/** Flags of `coa train pretrain`; unset ones fall back to --config, then to PretrainConfig's defaults. */
export const PretrainFlags = NextTokenFlags.extend({
  seeds: z.string().optional(),
  excludeSeeds: z.string().optional(),
  evalSeed: Int.optional(),
  size: WorldSize.optional(),
  maxHops: Int.optional(),
  mix: z.string().optional(),
});

/** Flags of `coa train rl`; unset ones fall back to --config, then to RlConfig's defaults. */
export const RlFlags = z.object({
  from: z.string().optional(),
  preset: EnginePreset.optional(),
  tasks: z.string(),
  out: z.string(),
  corpus: z.string().optional(),
  config: z.string().optional(),
  steps: Int.optional(),
  groupSize: Int.optional(),
  batchTasks: Int.optional(),
  lr: Num.optional(),
  concurrency: Int.optional(),
  temperature: Num.optional(),
  profile: z.string().optional(),
  seed: Int.optional(),
  threads: Int.optional(),
  unsafeNoSandbox: z.boolean().default(false),
  searchTopK: SearchTopK,
  ...WebToolFlags.shape,
});

async function configFile(file: string | undefined): Promise<Record<string, unknown>> {
  if (!file) return {};
  try {
    return JSON.parse(await readFile(file, "utf8"));
  } catch (err) {
    throw new Error(`--config ${file}: ${(err as Error).message}`);
  }
}

const defined = <T extends Record<string, unknown>>(o: T): Partial<T> =>
  Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined)) as Partial<T>;

function checkConfig<S extends z.ZodType>(schema: S, input: unknown): void {
  const parsed = schema.safeParse(input);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    throw new Error(`config field ${issue.path.join(".")}: ${issue.message}`);
  }
}

/**
 * The engine for a run: its own last checkpoint when resuming, else --from, else a fresh preset.
 * `context` and `tokenizer` shape a fresh preset; `context` also lengthens a --from checkpoint's
 * (rotary positions carry no weights); a resumed run keeps what it saved.
 */
async function engineFor(
  out: string,
  from: string | undefined,
  preset: EnginePreset,
  opts: { threads?: number; context?: number; tokenizer?: () => Promise<string | null> } = {},
) {
  const latest = await new Checkpoints(path.resolve(out), 1).latest();
  if (latest) process.stderr.write(`resuming from ${latest}\n`);
  if (latest) return Engine.start({ checkpoint: latest }, { threads: opts.threads });
  if (from) return Engine.start({ checkpoint: from }, { threads: opts.threads, maxSeqLen: opts.context });
  const tokenizer = (await opts.tokenizer?.()) ?? undefined;
  return Engine.start({ preset }, { threads: opts.threads, maxSeqLen: opts.context, tokenizer });
}

/** The share of a step's rollout prompt tokens the engine's prefix cache supplied, for the progress line. */
function promptReuse(m: RlStepMetrics): string {
  const saved = m.saved_prefill_tokens ?? 0;
  const all = saved + (m.prefill_tokens ?? 0);
  return all ? ` prompts ${Math.round((100 * saved) / all)}% cached` : "";
}

/**
 * A training run outlives a crash of its engine process: it starts a new engine from the run's last
 * checkpoint and goes on (`withEngineRestarts`), saying so on stderr.
 */
function engineRestarts(out: string): EngineRestartOptions {
  return {
    latestCheckpoint: () => new Checkpoints(path.resolve(out), 1).latest(),
    onRestart: ({ reason, checkpoint, restart, restarts }) =>
      process.stderr.write(
        `\n${reason}; starting a new engine from ${checkpoint} (restart ${restart} of ${restarts})\n`,
      ),
  };
}

export function register(program: Command): void {
  const train = program
    .command("train")
    .description("train the agent model on the embedded engine: pretraining, SFT, then RL");

  train
    .command("sft")
    .description("supervised fine-tuning on native trajectories (resumes from <out>/last when present)")
    .requiredOption("--data <path>", "native.jsonl, or the folder `coa distill` wrote it to")
    .requiredOption("--out <dir>", "run folder")
    .option("--preset <name>", `fresh model size (${EnginePreset.options.join("|")})`, "tiny")
    .option("--from <checkpoint>", "start from this checkpoint instead of a fresh preset")
    .option(
      "--context <n>",
      "context length of a fresh --preset model, or a longer one for --from (default: the preset's or checkpoint's)",
    )
    .option(
      "--tokenizer <file>",
      "vocabulary of a fresh --preset model (default: the data's tokenizer.json, else bytes)",
    )
    .option("--config <json>", "a JSON file of SftConfig fields; flags override it")
    .option("--steps <n>", "total optimizer steps (default: --epochs over the data)")
    .option("--epochs <n>", "passes over the data")
    .option("--lr <x>", "peak learning rate")
    .option("--batch-tokens <n>", "padded tokens per step")
    .option("--max-length <n>", "longer examples are truncated")
    .option("--eval-every <n>", "held-out loss every n steps (0: off)")
    .option("--checkpoint-every <n>", "checkpoint every n steps")
    .option("--seed <n>", "data order and held-out slice")
    .option("--threads <n>", "engine threads")
    .option(
      "--dev-tasks <path>",
      "a learning curve in success: a world (its dev split) or task file whose first tasks the model answers as it trains",
    )
    .option("--dev-limit <n>", "dev tasks per probe (default 20)")
    .option("--dev-every <n>", "probe every n steps (default: --eval-every)")
    .option("--max-turns <n>", "dev probe: turns per episode")
    .option("--max-tokens-per-turn <n>", "dev probe: tokens per model call")
    .option(...SEARCH_TOP_K_OPTION)
    .action(async (raw: Record<string, unknown>) => {
      const f = parseFlags(SftFlags, raw);
      const { preset, from, context, tokenizer, config: file, threads, ...rest } = f;
      const { devTasks, devLimit, devEvery, searchTopK, maxTurns, maxTokensPerTurn, ...sftFields } = rest;
      const input: SftConfigInput = { ...(await configFile(file)), ...defined(sftFields) } as SftConfigInput;
      checkConfig(SftConfig, input);
      const startEngine = () =>
        engineFor(f.out, from, preset, {
          threads,
          context,
          tokenizer: async () => tokenizer ?? dataTokenizerFile(await resolveTrajectoryFile(f.data)),
        });
      const bar = itemProgress("sft", { every: { items: 10 } });
      try {
        const summary = await withEngineRestarts(
          startEngine,
          async (engine) => {
            const probe = devTasks
              ? await devProbe(engine, {
                  tasks: devTasks,
                  limit: devLimit,
                  every: devEvery ?? SftConfig.parse(input).evalEvery,
                  runDir: f.out,
                  searchTopK,
                  maxTurns,
                  maxTokensPerTurn,
                })
              : undefined;
            return runSft(input, engine, {
              probe,
              onBadLine: (b) => process.stderr.write(`${b.file}:${b.line}: ${b.message} (skipped)\n`),
              onStep: (m, total) =>
                bar.update(
                  m.step + 1,
                  total,
                  `loss ${m.loss.toFixed(4)}${m.eval_loss === undefined ? "" : ` eval ${m.eval_loss.toFixed(4)}`}${m.dev_success === undefined ? "" : ` dev ${(100 * m.dev_success).toFixed(0)}%`} lr ${m.lr.toExponential(2)} ${Math.round(m.tokens_per_s)} tok/s`,
                ),
            });
          },
          engineRestarts(f.out),
        );
        bar.stop();
        process.stdout.write(
          `sft: ${summary.steps} steps, loss ${summary.lastLoss?.toFixed(4)}, eval ${summary.evalLoss?.toFixed(4) ?? "-"}; ${path.join(summary.runDir, "last")} -> ${summary.checkpoint}\n`,
        );
      } finally {
        bar.stop();
      }
    });

  train
    .command("pretrain")
    .description(
      "next-token pretraining of a base model on generated worlds' text (resumes from <out>/last when present)",
    )
    .option("--seeds <list>", "worlds to read, e.g. 101-124 or 101,102,110-119 (required unless in --config)")
    .option("--exclude-seeds <list>", "seeds never read, e.g. the test world's (1)")
    .option(
      "--eval-seed <n>",
      "held-out world of the eval losses (default: the last of --seeds, not trained on)",
    )
    .option("--size <size>", `world size (${WorldSize.options.join("|")}; default small)`)
    .option("--max-hops <n>", "question difficulty of the worlds the drills follow (2-4; default 4)")
    .option(
      "--mix <kinds>",
      "text kinds with optional weights: articles,pages,lookup,chain,facts (drills = the last three), e.g. articles,drills or articles:2,chain:0.5 (default: all, weight 1)",
    )
    .requiredOption("--out <dir>", "run folder")
    .option("--preset <name>", `fresh model size (${EnginePreset.options.join("|")})`, "tiny")
    .option("--from <checkpoint>", "continue pretraining this checkpoint (keeps its vocabulary and context)")
    .option(
      "--context <n>",
      "context length of a fresh --preset model, or a longer one for --from (default: the preset's or checkpoint's)",
    )
    .option(
      "--tokenizer <bpe:N|file>",
      "a fresh model's vocabulary: learn an N-token BPE from the training worlds, or a tokenizer file (default bpe:2048)",
    )
    .option("--config <json>", "a JSON file of PretrainConfig fields; flags override it")
    .option("--steps <n>", "total optimizer steps (default 1000)")
    .option("--lr <x>", "peak learning rate (default 1e-3)")
    .option("--batch-tokens <n>", "tokens per step (default 4096)")
    .option("--max-length <n>", "tokens per packed sequence (default: --context when given, else 1024)")
    .option("--eval-every <n>", "held-out losses every n steps (0: off)")
    .option("--checkpoint-every <n>", "checkpoint every n steps")
    .option("--seed <n>", "data order and mix draws")
    .option("--threads <n>", "engine threads")
    .addHelpText(
      "after",
      "\nExamples:\n  coa train pretrain --seeds 101-124 --exclude-seeds 1 --preset tiny --out runs/base --steps 1000\n  coa train sft --data runs/data --from runs/base/last --out runs/sft   # distill with --tokenizer runs/base/tokenizer.json",
    )
    .action(async (raw: Record<string, unknown>) => {
      const f = parseFlags(PretrainFlags, raw);
      const { preset, from, context, config: file, threads, seeds, excludeSeeds, mix, ...rest } = f;
      if (from && f.tokenizer) throw new Error("--tokenizer: a --from checkpoint keeps its own vocabulary");
      const fileConfig = await configFile(file);
      const input = {
        ...fileConfig,
        ...defined({
          ...rest,
          seeds: seeds === undefined ? undefined : parseSeeds(seeds),
          excludeSeeds: excludeSeeds === undefined ? undefined : parseSeeds(excludeSeeds),
          mix: mix === undefined ? undefined : parseMix(mix),
          maxLength: f.maxLength ?? (fileConfig.maxLength === undefined ? context : undefined),
        }),
      } as PretrainConfigInput;
      if (input.seeds === undefined) throw new Error("--seeds: give the worlds to pretrain on, e.g. 101-124");
      checkConfig(PretrainConfig, input);
      const config = PretrainConfig.parse(input);
      const out = path.resolve(config.out);
      const { train: trainSeeds, eval: evalSeed } = config.worlds;
      process.stderr.write(
        `pretrain: ${trainSeeds.length} training worlds (${trainSeeds.join(",")}), held-out world ${evalSeed}, size ${config.size}\n`,
      );
      const corpus = pretrainCorpus(config);
      const startEngine = () =>
        engineFor(out, from, preset, {
          threads,
          context,
          tokenizer: async () => {
            const tok = await pretrainTokenizer(config.tokenizer, corpus);
            await mkdir(out, { recursive: true });
            const tokFile = path.join(out, TOKENIZER_FILE);
            await writeFile(tokFile, `${JSON.stringify(tok)}\n`);
            return tokFile;
          },
        });
      const bar = itemProgress("pretrain", { every: { items: 10 } });
      const fert = (x: Fertility) =>
        `${x.tokensPerChar.toFixed(3)} tokens/char, ${x.tokensPerName.toFixed(2)} tokens/name`;
      try {
        const summary = await withEngineRestarts(
          startEngine,
          async (engine) => {
            const tokenizer = engine.localTokenizer;
            if (!tokenizer) throw new Error(`the engine's tokenizer ${engine.tokenizer} could not be read`);
            const context = engine.startInfo.max_model_len;
            if (config.maxLength > context)
              throw new Error(
                `--max-length ${config.maxLength} exceeds the model's context of ${context} tokens (a fresh preset takes --context)`,
              );
            return runPretrain(
              input,
              engine,
              { tokenizer, corpus },
              {
                onData: (d) =>
                  process.stderr.write(
                    `pretrain: ${tokenizer.name} (${tokenizer.vocabSize} tokens): ${fert(d.fertility.train)} on the training worlds, ${fert(d.fertility.heldOut)} on the held-out world; one pass ${d.epoch.tokens} tokens = ${d.epoch.steps} steps\n`,
                  ),
                onStep: (m, total) =>
                  bar.update(
                    m.step + 1,
                    total,
                    `loss ${m.loss.toFixed(4)}${m.eval_loss === undefined ? "" : ` eval ${m.eval_loss.toFixed(4)}`}${m.eval_copy_loss === undefined ? "" : ` copy ${m.eval_copy_loss.toFixed(4)}`}${m.eval_read_loss === undefined ? "" : ` read ${m.eval_read_loss.toFixed(4)}`}${m.eval_number_loss === undefined ? "" : ` numbers ${m.eval_number_loss.toFixed(4)}`} lr ${m.lr.toExponential(2)} ${Math.round(m.tokens_per_s)} tok/s`,
                  ),
              },
            );
          },
          engineRestarts(out),
        );
        bar.stop();
        process.stdout.write(
          `pretrain: ${summary.steps} steps, loss ${summary.lastLoss?.toFixed(4)}, held-out ${summary.evalLoss?.toFixed(4) ?? "-"}, copy ${summary.copyLoss?.toFixed(4) ?? "-"}, read ${summary.readLoss?.toFixed(4) ?? "-"}, numbers ${summary.numberLoss?.toFixed(4) ?? "-"}; ${path.join(summary.runDir, "last")} -> ${summary.checkpoint}\n`,
        );
      } finally {
        bar.stop();
      }
    });

  addWebToolOptions(train.command("rl"))
    .description(
      "agentic RL (GRPO + DAPO) with rollouts through the runtime and tools (resumes from <out>/last)",
    )
    .requiredOption(
      "--tasks <path>",
      "task file (the world's tasks/rl.jsonl, verl parquet, …), a world folder or a world set (their rl split)",
    )
    .requiredOption("--out <dir>", "run folder")
    .option("--from <checkpoint>", "policy to start from, e.g. runs/sft/last")
    .option("--preset <name>", "fresh model size when there is no --from (for experiments)")
    .option("--corpus <jsonl>", "corpus for search and crawl (default: the world's corpus.jsonl)")
    .option("--config <json>", "a JSON file of RlConfig fields; flags override it")
    .option("--steps <n>", "RL steps")
    .option("--group-size <n>", "samples per task")
    .option("--batch-tasks <n>", "groups per policy batch")
    .option("--lr <x>", "policy learning rate")
    .option("--concurrency <n>", "episodes in flight")
    .option("--temperature <t>", "sampling temperature")
    .option("--profile <name>", "tag set the model was trained on (default all)")
    .option("--seed <n>", "task order and sampling seeds")
    .option("--threads <n>", "engine threads")
    .option(...SEARCH_TOP_K_OPTION)
    .option("--unsafe-no-sandbox", "let the code tool run Python without bubblewrap")
    .action(async (raw: Record<string, unknown>) => {
      const f = parseFlags(RlFlags, raw);
      if (!f.from && !f.preset) throw new Error("give --from <checkpoint> (e.g. runs/sft/last) or --preset");
      const file = await configFile(f.config);
      const pick = (o: unknown) => (o && typeof o === "object" ? o : {});
      const input = {
        ...file,
        ...defined({ from: f.from, tasks: f.tasks, out: f.out, steps: f.steps, seed: f.seed }),
        ...defined({ groupSize: f.groupSize, batchTasks: f.batchTasks }),
        rollout: {
          ...pick(file.rollout),
          ...defined({ concurrency: f.concurrency, temperature: f.temperature, profile: f.profile }),
        },
        update: { ...pick(file.update), ...defined({ lr: f.lr }) },
      } as RlConfigInput;
      checkConfig(RlConfig, input);
      const config = RlConfig.parse(input);
      const bar = itemProgress("rl", { every: { items: 1 } });
      const web = await openWebTools(f, f.searchTopK);
      try {
        // A world folder's rl split, a task file, or every world's rl split of a world set.
        const { tasks, tools, skipped } = await taskGround(
          { tasks: f.tasks, split: "rl", corpus: f.corpus },
          (corpus) => {
            const tools = createToolset({
              corpus,
              profile: config.rollout.profile,
              ...web,
              code: { unsafeNoSandbox: f.unsafeNoSandbox },
            });
            prepareToolset(tools); // while the engine starts
            return tools;
          },
        );
        for (const s of skipped.slice(0, 5)) process.stderr.write(`skipped task: ${JSON.stringify(s)}\n`);
        const summary = await withEngineRestarts(
          () => engineFor(f.out, f.from, f.preset ?? "tiny", { threads: f.threads }),
          (engine) =>
            runRl(
              { ...input, maxSequenceTokens: config.maxSequenceTokens ?? engine.startInfo.max_model_len },
              tasks,
              {
                client: engine,
                runEpisode: agentEpisodes({ model: engine, tools, rollout: config.rollout }),
                score: (task, prediction) => scoreTask(task, prediction),
                detokenize: (ids) => engine.detokenize(ids),
              },
              {
                onStep: (m, total) =>
                  bar.update(
                    m.step + 1,
                    total,
                    `reward ${m.reward_mean.toFixed(3)} success ${m.success.toFixed(2)} kept ${m.groups_kept}/${m.groups_drawn} len ${m.response_length.toFixed(0)}${promptReuse(m)}`,
                  ),
              },
            ),
          engineRestarts(f.out),
        );
        bar.stop();
        process.stdout.write(
          `rl: ${summary.steps} steps, reward ${summary.last?.reward_mean.toFixed(3) ?? "-"}; ${path.join(summary.runDir, "last")} -> ${summary.checkpoint}\n`,
        );
      } finally {
        bar.stop();
        await web.close();
      }
    });
}
