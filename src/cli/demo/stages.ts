import { spawn } from "node:child_process";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { TOKENIZER_FILE } from "../../model/index.js";
import { parseSeeds, worldDirName } from "../../tasks/index.js";
import type { DemoPreset } from "./presets.js";

/** One step of the demo: a `coa` subcommand whose output lands in `dir` under the demo folder. */
export interface DemoStage {
  name: string;
  title: string;
  dir: string;
  args: string[];
}

/** The paper on one machine: world → teacher → distill → SFT → RL → evaluate all three systems. */
export function demoStages(p: DemoPreset, out: string): DemoStage[] {
  const at = (d: string) => path.join(out, d);
  // The student learns on many worlds and is tested on one it never saw (its seed is not among them).
  const world = at("world");
  const worlds = at("worlds");
  const rlWorld = path.join(worlds, worldDirName(parseSeeds(p.trainSeeds)[0]!));
  const base = baseCheckpoint(p, out);
  // Every system is measured on the same test tasks of the unseen world.
  const testTasks = ["--tasks", world, "--split", "test", "--limit", String(p.evalTasks)];
  const evalArgs = (model: string, dir: string) => [
    "eval",
    "--model",
    `engine:${at(model)}`,
    ...testTasks,
    "--k",
    String(p.evalK),
    "--temperature",
    String(p.evalTemperature),
    "--max-turns",
    String(p.maxTurns),
    "--max-tokens-per-turn",
    String(p.maxTokensPerTurn),
    "--concurrency",
    String(p.concurrency),
    "--search-top-k",
    String(p.searchTopK),
    "--out",
    at(dir),
  ];
  const stages: DemoStage[] = [
    {
      name: "world",
      title: "generate the unseen test world",
      dir: "world",
      args: [
        "world",
        "generate",
        "--seed",
        String(p.seed),
        "--size",
        p.worldSize,
        "--max-hops",
        String(p.maxHops),
        "--out",
        world,
      ],
    },
    {
      name: "worlds",
      title: "generate the worlds the student learns on",
      dir: "worlds",
      args: [
        "world",
        "generate",
        "--seeds",
        p.trainSeeds,
        "--size",
        p.worldSize,
        "--max-hops",
        String(p.maxHops),
        "--out",
        worlds,
      ],
    },
    {
      name: "teach",
      title: "teacher MAS on the train split of every training world",
      dir: "teach",
      args: [
        "teach",
        "--tasks",
        worlds,
        "--split",
        "train",
        "--driver",
        "expert",
        "--limit",
        String(p.teachTasks),
        "--search-top-k",
        String(p.searchTopK),
        "--out",
        at("teach"),
      ],
    },
    {
      name: "distill",
      title: "distill traces into CoA trajectories",
      dir: "data",
      args: [
        "distill",
        "--traces",
        at("teach"),
        "--out",
        at("data"),
        "--max-tokens",
        String(p.distillMaxTokens),
        // Trajectories in the base's own ids; without a base, a vocabulary learned from them.
        ...(base
          ? ["--tokenizer", path.join(base, TOKENIZER_FILE)]
          : p.bpeVocab
            ? ["--tokenizer", `bpe:${p.bpeVocab}`]
            : []),
      ],
    },
    {
      name: "sft",
      title: base ? "SFT the base model" : `SFT a fresh ${p.modelPreset} model`,
      dir: "sft",
      args: [
        "train",
        "sft",
        "--data",
        at("data"),
        ...(base ? ["--from", base] : ["--preset", p.modelPreset]),
        ...(p.modelContext ? ["--context", String(p.modelContext)] : []),
        "--steps",
        String(p.sftSteps),
        "--max-length",
        String(p.sftMaxLength),
        "--lr",
        String(p.sftLr),
        "--batch-tokens",
        String(p.sftBatchTokens),
        // The learning curve in success: greedy episodes on dev tasks at four points of the run.
        "--dev-tasks",
        rlWorld,
        "--dev-every",
        String(Math.max(1, Math.ceil(p.sftSteps / 4))),
        "--dev-limit",
        String(p.devTasks),
        "--max-turns",
        String(p.maxTurns),
        "--max-tokens-per-turn",
        String(p.maxTokensPerTurn),
        "--search-top-k",
        String(p.searchTopK),
        "--out",
        at("sft"),
      ],
    },
    {
      name: "rl",
      title: "agentic RL on the rl split of a training world",
      dir: "rl",
      args: [
        "train",
        "rl",
        "--from",
        path.join(at("sft"), "last"),
        "--tasks",
        rlWorld,
        "--steps",
        String(p.rlSteps),
        "--group-size",
        String(p.rlGroupSize),
        "--batch-tasks",
        String(p.rlBatchTasks),
        "--search-top-k",
        String(p.searchTopK),
        "--config",
        at("rl-config.json"),
        "--out",
        at("rl"),
      ],
    },
    {
      name: "eval-teacher",
      title: "teacher MAS on the test split",
      dir: "teach-test",
      args: [
        "teach",
        ...testTasks,
        "--driver",
        "expert",
        "--search-top-k",
        String(p.searchTopK),
        // Counted in the student's vocabulary, so the comparison with the CoA model is like for like.
        "--tokenizer",
        path.join(at("data"), TOKENIZER_FILE),
        "--out",
        at("teach-test"),
      ],
    },
    // The paper's cost claim against a real framework: the same team rebuilt on @openai/agents, its
    // traces as the framework sent every call, counted in the student's vocabulary (docs/import.md).
    {
      name: "team-test",
      title: "the teacher's team on @openai/agents, on the test split",
      dir: "team-test",
      args: ["team", ...testTasks, "--search-top-k", String(p.searchTopK), "--out", at("team-test")],
    },
    {
      name: "import-team",
      title: "import the framework team's traces",
      dir: "team-traces",
      args: [
        "import",
        path.join(at("team-test"), "spans.jsonl"),
        "--from",
        "openai-agents",
        "--tasks",
        world,
        "--split",
        "test",
        "--tokenizer",
        path.join(at("data"), TOKENIZER_FILE),
        "--out",
        at("team-traces"),
      ],
    },
    {
      name: "eval-sft",
      title: "evaluate AFM-SFT on the test split",
      dir: "eval-sft",
      args: evalArgs("sft/last", "eval-sft"),
    },
    {
      name: "eval-rl",
      title: "evaluate AFM-RL on the test split",
      dir: "eval-rl",
      args: evalArgs("rl/last", "eval-rl"),
    },
  ];
  if (p.base !== "pretrain") return stages;
  const pretrainWorlds = [
    "--seeds",
    p.pretrainSeeds,
    "--exclude-seeds",
    String(p.seed),
    "--size",
    p.worldSize,
    "--max-hops",
    String(p.maxHops),
  ];
  const pretrain: DemoStage = {
    name: "pretrain",
    title: `pretrain a ${p.modelPreset} base on worlds ${p.pretrainSeeds}`,
    dir: "base",
    args: [
      "train",
      "pretrain",
      ...pretrainWorlds,
      ...(p.pretrainMix ? ["--mix", p.pretrainMix] : []),
      "--preset",
      p.modelPreset,
      ...(p.modelContext ? ["--context", String(p.modelContext)] : []),
      "--tokenizer",
      `bpe:${p.bpeVocab ?? 2048}`,
      "--steps",
      String(p.pretrainSteps),
      "--lr",
      String(p.pretrainLr),
      "--batch-tokens",
      String(p.pretrainBatchTokens),
      "--out",
      at("base"),
    ],
  };
  const read = p.pretrainRead;
  const reading: DemoStage[] = read
    ? [
        {
          name: "pretrain-read",
          title: "go on pretraining the base on search-reading drills",
          dir: "base-read",
          args: [
            "train",
            "pretrain",
            "--from",
            path.join(at("base"), "last"),
            ...pretrainWorlds,
            "--mix",
            read.mix,
            "--steps",
            String(read.steps),
            "--lr",
            String(read.lr),
            "--batch-tokens",
            String(p.pretrainBatchTokens),
            "--out",
            at("base-read"),
          ],
        },
      ]
    : [];
  return [...stages.slice(0, 2), pretrain, ...reading, ...stages.slice(2)];
}

/** The package root, where the shipped base lives (src/cli/demo and dist/cli/demo alike sit three below). */
const PACKAGE_ROOT = fileURLToPath(new URL("../../..", import.meta.url));

/** The checkpoint SFT starts from: the shipped base, the one this demo pretrains, or none. */
export function baseCheckpoint(p: DemoPreset, out: string): string | null {
  if (p.base === "shipped") return path.resolve(PACKAGE_ROOT, p.baseDir);
  if (p.base === "pretrain") return path.join(out, p.pretrainRead ? "base-read" : "base", "last");
  return null;
}

/**
 * Runs a stage as a child `coa` process (the same entry point and loader as this one), so each
 * stage keeps its own progress output, engine process and resume logic.
 */
export function runStage(stage: DemoStage): Promise<void> {
  const entry = process.argv[1]!;
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [...process.execArgv, entry, ...stage.args], { stdio: "inherit" });
    const forward = (signal: NodeJS.Signals) => child.kill(signal);
    process.once("SIGINT", forward);
    process.once("SIGTERM", forward);
    child.once("error", reject);
    child.once("exit", (code, signal) => {
      process.off("SIGINT", forward);
      process.off("SIGTERM", forward);
      if (code === 0) resolve();
      else
        reject(
          new Error(`stage ${stage.name} failed (${signal ?? `exit ${code}`}): coa ${stage.args.join(" ")}`),
        );
    });
  });
}
