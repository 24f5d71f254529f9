import { spawn } from "node:child_process";
import path from "node:path";
import { fileURLToPath } from "node:url";
import type { z } from "zod";
import { TOKENIZER_FILE } from "../../model/index.js";
import { parseSeeds, worldDirName } from "../../tasks/index.js";
import { LAST_LINK, RolloutConfig } from "../../train/index.js";
import { ARTIFACTS } from "../artifacts.js";
import { type CoaCommand, coaCommand, commandArgs, type FlagValues } from "../command-args.js";
import { DistillFlags } from "../commands/distill.js";
import { EvalFlags } from "../commands/eval.js";
import { ImportFlags } from "../commands/import.js";
import { TeachFlags } from "../commands/teach.js";
import { TEAM_SPANS_FILE, TeamFlags } from "../commands/team.js";
import { PretrainFlags, RlFlags, SftFlags } from "../commands/train.js";
import { WorldGenerateFlags } from "../commands/world.js";
import type { DemoPreset } from "./presets.js";

/** What the system prompt and question take of the model's context. */
const PROMPT_ROOM = 640;

/** Folders of the unseen test world and of the training worlds in a demo folder. */
const TEST_WORLD_DIR = "world";
const TRAIN_WORLDS_DIR = "worlds";

/** Folders of the evaluations sampled at the RL temperature (`rlEvalK`), which RL's gain is read from. */
export const SAMPLED_EVAL_DIRS = { sft: "eval-sft-sampled", rl: "eval-rl-sampled" } as const;

/** The temperature RL samples its rollouts at (the preset's, else RlConfig's default). */
export function demoRlTemperature(p: DemoPreset): number {
  return p.rlTemperature ?? RolloutConfig.parse({}).temperature;
}

/**
 * The file `coa train rl --config` reads in the demo: episodes as long as evaluation's, filling the
 * student's context but for the prompt, with the preset's learning rate, temperature, clip,
 * negative scale and format penalty (RlConfig's defaults where the preset names none).
 */
export function demoRlConfig(p: DemoPreset, context: number): z.input<typeof ARTIFACTS.rlConfig.schema> {
  return {
    rollout: {
      maxTurns: p.maxTurns,
      maxTokensPerTurn: p.maxTokensPerTurn,
      concurrency: p.concurrency,
      maxResponseTokens: context - PROMPT_ROOM,
      temperature: p.rlTemperature,
    },
    reward: { formatWeight: p.rlFormatWeight },
    update: {
      lr: p.rlLr,
      clipHigh: p.rlClipHigh,
      negativeScale: p.rlNegativeScale,
      positiveMinProb: p.rlPositiveMinProb,
    },
  };
}

/** One step of the demo: a `coa` command whose output lands in `dir` under the demo folder. */
export interface DemoStage {
  name: string;
  title: string;
  dir: string;
  command: CoaCommand;
}

/** The paper on one machine: world → teacher → distill → SFT → RL → evaluate all three systems. */
export function demoStages(p: DemoPreset, out: string): DemoStage[] {
  const at = (d: string) => path.join(out, d);
  // The student learns on many worlds and is tested on one it never saw (its seed is not among them).
  const world = at(TEST_WORLD_DIR);
  const worlds = at(TRAIN_WORLDS_DIR);
  const rlWorld = demoRlWorld(p, out);
  const base = baseCheckpoint(p, out);
  const testTasks = demoTestTasks(p, out);
  const studentTokenizer = path.join(at("data"), TOKENIZER_FILE);
  const evaluate = (model: string, dir: string) =>
    demoEvalCommand(p, out, { model: at(model), out: at(dir), k: p.evalK, temperature: p.evalTemperature });
  // RL's gain, on the policy it trained: both models sampled at the RL temperature, k per task.
  const sampledEvals = (k: number) =>
    (["sft", "rl"] as const).map((model) => ({
      name: `eval-${model}-sampled`,
      title: `evaluate AFM-${model.toUpperCase()} sampled at the RL temperature, ${k} per task`,
      dir: SAMPLED_EVAL_DIRS[model],
      command: demoEvalCommand(p, out, {
        model: at(`${model}/${LAST_LINK}`),
        out: at(SAMPLED_EVAL_DIRS[model]),
        k,
        temperature: demoRlTemperature(p),
      }),
    }));
  const worldFlags = { size: p.worldSize, maxHops: p.maxHops } satisfies FlagValues<
    typeof WorldGenerateFlags
  >;
  const stages: DemoStage[] = [
    {
      name: "world",
      title: "generate the unseen test world",
      dir: TEST_WORLD_DIR,
      command: coaCommand(["world", "generate"], WorldGenerateFlags, {
        seed: p.seed,
        ...worldFlags,
        out: world,
      }),
    },
    {
      name: "worlds",
      title: "generate the worlds the student learns on",
      dir: TRAIN_WORLDS_DIR,
      command: coaCommand(["world", "generate"], WorldGenerateFlags, {
        seeds: p.trainSeeds,
        ...worldFlags,
        out: worlds,
      }),
    },
    {
      name: "teach",
      title: "teacher MAS on the train split of every training world",
      dir: "teach",
      command: coaCommand(["teach"], TeachFlags, {
        tasks: worlds,
        split: "train",
        driver: "expert",
        limit: p.teachTasks,
        searchTopK: p.searchTopK,
        out: at("teach"),
      }),
    },
    {
      name: "distill",
      title: "distill traces into CoA trajectories",
      dir: "data",
      command: coaCommand(["distill"], DistillFlags, {
        traces: at("teach"),
        out: at("data"),
        maxTokens: p.distillMaxTokens,
        // Trajectories in the base's own ids; without a base, a vocabulary learned from them.
        tokenizer: base ? path.join(base, TOKENIZER_FILE) : p.bpeVocab ? `bpe:${p.bpeVocab}` : undefined,
      }),
    },
    {
      name: "sft",
      title: base ? "SFT the base model" : `SFT a fresh ${p.modelPreset} model`,
      dir: "sft",
      command: coaCommand(["train", "sft"], SftFlags, {
        data: at("data"),
        ...(base ? { from: base } : { preset: p.modelPreset }),
        context: p.modelContext,
        steps: p.sftSteps,
        maxLength: p.sftMaxLength,
        lr: p.sftLr,
        batchTokens: p.sftBatchTokens,
        // The learning curve in success: greedy episodes on dev tasks at four points of the run.
        devTasks: rlWorld,
        devEvery: Math.max(1, Math.ceil(p.sftSteps / 4)),
        devLimit: p.devTasks,
        maxTurns: p.maxTurns,
        maxTokensPerTurn: p.maxTokensPerTurn,
        searchTopK: p.searchTopK,
        out: at("sft"),
      }),
    },
    {
      name: "rl",
      title: "agentic RL on the rl split of a training world",
      dir: "rl",
      command: demoRlCommand(p, out, { steps: p.rlSteps, out: at("rl") }),
    },
    {
      name: "eval-teacher",
      title: "teacher MAS on the test split",
      dir: "teach-test",
      command: coaCommand(["teach"], TeachFlags, {
        ...testTasks,
        driver: "expert",
        searchTopK: p.searchTopK,
        // Counted in the student's vocabulary, so the comparison with the CoA model is like for like.
        tokenizer: studentTokenizer,
        out: at("teach-test"),
      }),
    },
    // The paper's cost claim against a real framework: the same team rebuilt on @openai/agents, its
    // traces as the framework sent every call, counted in the student's vocabulary (docs/import.md).
    {
      name: "team-test",
      title: "the teacher's team on @openai/agents, on the test split",
      dir: "team-test",
      command: coaCommand(["team"], TeamFlags, {
        ...testTasks,
        searchTopK: p.searchTopK,
        out: at("team-test"),
      }),
    },
    {
      name: "import-team",
      title: "import the framework team's traces",
      dir: "team-traces",
      command: coaCommand(
        ["import"],
        ImportFlags,
        {
          from: "openai-agents",
          tasks: world,
          split: "test",
          tokenizer: studentTokenizer,
          out: at("team-traces"),
        },
        [path.join(at("team-test"), TEAM_SPANS_FILE)],
      ),
    },
    {
      name: "eval-sft",
      title: "evaluate AFM-SFT on the test split",
      dir: "eval-sft",
      command: evaluate(`sft/${LAST_LINK}`, "eval-sft"),
    },
    {
      name: "eval-rl",
      title: "evaluate AFM-RL on the test split",
      dir: "eval-rl",
      command: evaluate(`rl/${LAST_LINK}`, "eval-rl"),
    },
    ...(p.rlEvalK ? sampledEvals(p.rlEvalK) : []),
  ];
  if (p.base !== "pretrain") return stages;
  const pretrainWorlds = {
    seeds: p.pretrainSeeds,
    excludeSeeds: String(p.seed),
    size: p.worldSize,
    maxHops: p.maxHops,
  } satisfies FlagValues<typeof PretrainFlags>;
  const pretrain: DemoStage = {
    name: "pretrain",
    title: `pretrain a ${p.modelPreset} base on worlds ${p.pretrainSeeds}`,
    dir: "base",
    command: coaCommand(["train", "pretrain"], PretrainFlags, {
      ...pretrainWorlds,
      mix: p.pretrainMix,
      preset: p.modelPreset,
      context: p.modelContext,
      // Without bpeVocab, pretraining's own default vocabulary.
      tokenizer: p.bpeVocab ? `bpe:${p.bpeVocab}` : undefined,
      steps: p.pretrainSteps,
      lr: p.pretrainLr,
      batchTokens: p.pretrainBatchTokens,
      out: at("base"),
    }),
  };
  // Each further stage goes on from the one before it.
  const more = (p.pretrainMore ?? []).map(
    (s, i, all): DemoStage => ({
      name: `pretrain-${s.name}`,
      title: s.title,
      dir: `base-${s.name}`,
      command: coaCommand(["train", "pretrain"], PretrainFlags, {
        from: path.join(at(i ? `base-${all[i - 1]!.name}` : "base"), LAST_LINK),
        ...pretrainWorlds,
        mix: s.mix,
        steps: s.steps,
        lr: s.lr,
        batchTokens: p.pretrainBatchTokens,
        out: at(`base-${s.name}`),
      }),
    }),
  );
  return [...stages.slice(0, 2), pretrain, ...more, ...stages.slice(2)];
}

/** The training world whose rl split RL draws its tasks from: the first of the training seeds. */
export function demoRlWorld(p: DemoPreset, out: string): string {
  return path.join(out, TRAIN_WORLDS_DIR, worldDirName(parseSeeds(p.trainSeeds)[0]!));
}

/** `coa train rl` from the demo's SFT checkpoint with its RL config file (`npm run bench -- rl` goes on longer). */
export function demoRlCommand(p: DemoPreset, out: string, run: { steps: number; out: string }): CoaCommand {
  return coaCommand(["train", "rl"], RlFlags, {
    from: path.join(out, "sft", LAST_LINK),
    tasks: demoRlWorld(p, out),
    steps: run.steps,
    groupSize: p.rlGroupSize,
    batchTasks: p.rlBatchTasks,
    searchTopK: p.searchTopK,
    config: path.join(out, ARTIFACTS.rlConfig.file),
    out: run.out,
  });
}

/**
 * The test tasks of the unseen world, the same for every system (teach and team name these flags as
 * eval does). Spread flags escape excess-property checks, hence `satisfies`.
 */
function demoTestTasks(p: DemoPreset, out: string) {
  return { tasks: path.join(out, TEST_WORLD_DIR), split: "test", limit: p.evalTasks } satisfies FlagValues<
    typeof EvalFlags
  >;
}

/** `coa eval` of a checkpoint on the demo's test tasks, as every system is measured there. */
export function demoEvalCommand(
  p: DemoPreset,
  out: string,
  run: { model: string; out: string; k: number; temperature: number },
): CoaCommand {
  return coaCommand(["eval"], EvalFlags, {
    model: `engine:${run.model}`,
    ...demoTestTasks(p, out),
    k: run.k,
    temperature: run.temperature,
    maxTurns: p.maxTurns,
    maxTokensPerTurn: p.maxTokensPerTurn,
    concurrency: p.concurrency,
    searchTopK: p.searchTopK,
    out: run.out,
  });
}

/** The package root, where the shipped base lives (src/cli/demo and dist/cli/demo alike sit three below). */
const PACKAGE_ROOT = fileURLToPath(new URL("../../..", import.meta.url));

/** The checkpoint SFT starts from: the shipped base, the one this demo pretrains, or none. */
export function baseCheckpoint(p: DemoPreset, out: string): string | null {
  if (p.base === "shipped") return path.resolve(PACKAGE_ROOT, p.baseDir);
  if (p.base === "pretrain") {
    const last = p.pretrainMore?.at(-1);
    return path.join(out, last ? `base-${last.name}` : "base", LAST_LINK);
  }
  return null;
}

/**
 * Runs a stage as a child `coa` process (the same entry point and loader as this one), so each
 * stage keeps its own progress output, engine process and resume logic.
 */
export function runStage(stage: DemoStage): Promise<void> {
  const entry = process.argv[1]!;
  const args = commandArgs(stage.command);
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [...process.execArgv, entry, ...args], { stdio: "inherit" });
    const forward = (signal: NodeJS.Signals) => child.kill(signal);
    process.once("SIGINT", forward);
    process.once("SIGTERM", forward);
    child.once("error", reject);
    child.once("exit", (code, signal) => {
      process.off("SIGINT", forward);
      process.off("SIGTERM", forward);
      if (code === 0) resolve();
      else
        reject(new Error(`stage ${stage.name} failed (${signal ?? `exit ${code}`}): coa ${args.join(" ")}`));
    });
  });
}
