import { z } from "zod";
import { parseSeeds } from "../../tasks/index.js";
import { RewardConfig, UpdateConfig } from "../../train/index.js";

/** How big each stage of `coa demo` is. Times are what the stages took on a 2-core machine. */
export const DemoPreset = z.object({
  name: z.enum(["quick", "default", "full"]),
  worldSize: z.enum(["tiny", "small", "medium", "large"]),
  /** Seed of the test world, which no stage trains on. */
  seed: z.number().int(),
  /** Seeds of the worlds the teacher solves and RL trains on (`101-124`); never `seed`. */
  trainSeeds: z.string(),
  /** The most lookups a world question may need (2 to 4); fewer hops is an easier world. */
  maxHops: z.number().int().min(2).max(4),
  /**
   * Where the student starts: `none`, a fresh `modelPreset` model; `shipped`, the base model this
   * package ships (`baseDir`, pretrained by the command in its BASE.md); `pretrain`, a base this demo
   * pretrains first on the `pretrainSeeds` worlds (never the test seed). A base brings its own size,
   * context and vocabulary.
   */
  base: z.enum(["none", "shipped", "pretrain"]),
  /** The shipped base, relative to the package root. */
  baseDir: z.string(),
  /** What the shipped base was trained on, for the report (its BASE.md has the commands). */
  baseAbout: z.string(),
  pretrainSeeds: z.string(),
  pretrainSteps: z.number().int().positive(),
  pretrainLr: z.number().positive(),
  pretrainBatchTokens: z.number().int().positive(),
  /** `coa train pretrain --mix`; absent: every kind of text. */
  pretrainMix: z.string().optional(),
  /**
   * Stages that continue the first, each from the one before (`--from`), on its own mix, steps and
   * rate: the shipped base learns to read search results, then to copy numbers into computations
   * (models/base/BASE.md). Each writes `base-<name>` in the demo folder. Absent: one stage.
   */
  pretrainMore: z
    .array(
      z.object({
        name: z.string().regex(/^[a-z]+$/),
        title: z.string(),
        mix: z.string(),
        steps: z.number().int().positive(),
        lr: z.number().positive(),
      }),
    )
    .readonly()
    .optional(),
  /** Vocabulary of the BPE learned from the distilled traces; absent: the model reads bytes. */
  bpeVocab: z.number().int().min(512).optional(),
  /** Train tasks the teacher solves, drawn evenly from the training worlds (its traces become the SFT data). */
  teachTasks: z.number().int().positive(),
  modelPreset: z.enum(["micro", "tiny", "small"]),
  /** Context of the student: a fresh model's, or the base's lengthened for SFT; default the preset's or base's. */
  modelContext: z.number().int().positive().optional(),
  sftSteps: z.number().int().positive(),
  sftLr: z.number().positive(),
  /** Padded tokens per SFT step; a GPU wants far more than a CPU. */
  sftBatchTokens: z.number().int().positive(),
  /** Distilled trajectories longer than this are dropped. */
  distillMaxTokens: z.number().int().positive(),
  /** SFT truncates longer examples to this (the model's context). */
  sftMaxLength: z.number().int().positive(),
  rlSteps: z.number().int().positive(),
  rlGroupSize: z.number().int().min(2),
  rlBatchTasks: z.number().int().positive(),
  /**
   * RL's policy learning rate, rollout temperature and the ratio's upper clip; absent: RlConfig's
   * defaults (an LLM's 1e-5, 1, DAPO's 0.28). The micro student's values were measured
   * (docs/learning.md, "RL that helps"): with GRPO's symmetric update 3e-4 broke it (format errors
   * doubled), 5e-5 and 1e-4 gained; with no push on worse samples 2e-4 gained most.
   */
  rlLr: UpdateConfig.shape.lr.unwrap().optional(),
  rlTemperature: z.number().positive().optional(),
  rlClipHigh: UpdateConfig.shape.clipHigh.unwrap().optional(),
  /** RL's scale of negative advantages (UpdateConfig.negativeScale); absent: 1, GRPO's symmetric update. */
  rlNegativeScale: UpdateConfig.shape.negativeScale.unwrap().optional(),
  /** RL's floor for pushing up a better sample's tokens (UpdateConfig.positiveMinProb); absent: none. */
  rlPositiveMinProb: UpdateConfig.shape.positiveMinProb,
  /**
   * RL's penalty for an episode that broke the protocol (RewardConfig.formatWeight); absent: 0. A
   * student that solves nothing still has format errors to learn from, so its groups can differ.
   */
  rlFormatWeight: RewardConfig.shape.formatWeight.unwrap().optional(),
  /** Episodes in flight during RL rollouts and evaluation. */
  concurrency: z.number().int().positive(),
  /** Search results per call, for the teacher and the model alike: fewer hits, shorter contexts. */
  searchTopK: z.number().int().positive().max(20),
  /** Dev tasks of a training world the student answers at four points of SFT (its learning curve). */
  devTasks: z.number().int().positive(),
  /** Test tasks every system is evaluated on. */
  evalTasks: z.number().int().positive(),
  evalK: z.number().int().positive(),
  /** Sampling temperature of the evaluation; 0 (greedy) shows what a model knows when k is 1. */
  evalTemperature: z.number().min(0),
  /**
   * Samples per test task of a second evaluation of SFT and RL at the RL temperature, which RL's
   * paired gain is measured on (RL sharpens what the policy samples; the greedy answer barely
   * moves, docs/learning.md). Absent: the gain is read from the main evaluation.
   */
  rlEvalK: z.number().int().min(1).optional(),
  maxTurns: z.number().int().positive(),
  /** Tokens per model call in RL and evaluation: a teacher turn is under 250, a looping model is cut short. */
  maxTokensPerTurn: z.number().int().positive(),
  /** The up-front estimate printed before starting, in minutes. */
  estimateMinutes: z.number().positive(),
});
export type DemoPreset = z.infer<typeof DemoPreset>;

/** A demo folder's progress file: what finished, so a rerun resumes at the first stage that did not. */
export const DemoProgress = z.object({
  preset: z.string(),
  /** Every setting the stages ran with (a DemoPreset); a resumed run must use the same. */
  settings: z.record(z.string(), z.unknown()).optional(),
  done: z.array(z.object({ name: z.string(), title: z.string(), seconds: z.number() })),
});

/** A preset whose training worlds include its test world measures memory, not skill: refused. */
export function checkPresetSeeds(p: DemoPreset): DemoPreset {
  if (parseSeeds(p.trainSeeds).includes(p.seed))
    throw new Error(
      `trainSeeds ${p.trainSeeds} include the test world's seed ${p.seed}; the test world must be unseen`,
    );
  if (p.base === "pretrain" && parseSeeds(p.pretrainSeeds).includes(p.seed))
    throw new Error(
      `pretrainSeeds ${p.pretrainSeeds} include the test world's seed ${p.seed}; the test world must be unseen`,
    );
  return p;
}

/** The base model the package ships (see its BASE.md for the command that made it). */
export const SHIPPED_BASE = "models/base";

/**
 * The shipped base mid-trained on the teacher's CoA trajectories of worlds 201-224
 * (scripts/agent-base.sh): the analog of an LLM that already knows its tool protocol. The quick and
 * default presets start from it: from the plain base, the quick preset's SFT reaches 0-10% and the
 * default's needs 2,500 steps for 60% (a 47-minute demo on a 2-core EPYC; examples/demo-plain-base.json
 * runs it, docs/learning.md measures both).
 */
export const SHIPPED_AGENT_BASE = "models/agent-base";

/**
 * Fine-tuning the agent base on the demo's own trajectories: at the plain base's 2e-3 the steps undid
 * part of it (65.5% → 59.5% on 200 test tasks); at 3e-4 they added to it (docs/learning.md).
 */
const AGENT_BASE_START = {
  base: "shipped",
  baseDir: SHIPPED_AGENT_BASE,
  baseAbout:
    "the shipped base mid-trained on the teacher's CoA trajectories of other worlds (201-224), so it knows the protocol before its SFT",
  sftLr: 3e-4,
} as const;

/** The shipped base's pretraining (scripts/pretrain-base.sh); `--full` pretrains its own model size with the same worlds, stages, steps, rates and batch. */
const BASE_RECIPE = {
  baseDir: SHIPPED_BASE,
  baseAbout: "pretrained on generated text of other worlds",
  pretrainSeeds: "201-240",
  pretrainSteps: 1500,
  pretrainLr: 3e-3,
  pretrainBatchTokens: 8192,
  pretrainMix: "articles,pages,lookup,chain,facts",
  pretrainMore: [
    {
      name: "read",
      title: "go on pretraining the base on search-reading drills",
      mix: "search:0.3,facts,chain:0.3,lookup:0.5,articles,pages",
      steps: 1200,
      lr: 2e-3,
    },
    {
      name: "compute",
      title: "go on pretraining the base on drills that copy numbers into computations",
      mix: "compute,search:0.3,facts:0.5,chain:0.2,lookup:0.3,articles:0.5,pages:0.5",
      steps: 900,
      lr: 2e-3,
    },
  ],
} as const;

/**
 * RL of the micro student: the settings that raised its sampled success most (docs/learning.md,
 * "Leaning towards the better samples"): only the group's better samples are pushed up (negative
 * scale 0); pushing worse samples down is what broke the student at higher rates. Of those better
 * samples, the tokens drawn below p = 0.05 are not pushed up ("Which sampled failures RL should
 * remove"). The rate suits a student fine-tuned from the agent base at 3e-4: the 2e-4 that suited
 * students of the plain base (SFT at 2e-3) lost it points ("The default demo from the agent base").
 */
const MICRO_RL = {
  rlLr: 5e-5,
  rlTemperature: 1,
  rlClipHigh: 0.2,
  rlNegativeScale: 0,
  rlPositiveMinProb: 0.05,
} as const;

export const DEMO_PRESETS: Record<DemoPreset["name"], DemoPreset> = {
  quick: {
    name: "quick",
    ...BASE_RECIPE,
    ...AGENT_BASE_START,
    worldSize: "small",
    seed: 1,
    trainSeeds: "101-124",
    maxHops: 2,
    bpeVocab: 2048,
    teachTasks: 1200,
    modelPreset: "micro",
    modelContext: 2048,
    sftSteps: 200,
    sftBatchTokens: 8192,
    distillMaxTokens: 8192,
    sftMaxLength: 2048,
    rlSteps: 2,
    rlGroupSize: 4,
    rlBatchTasks: 2,
    ...MICRO_RL,
    // Sampled at temperature 1 the quick student still breaks the protocol often; the penalty
    // lets RL learn from groups where no episode solves its task.
    rlFormatWeight: 0.5,
    concurrency: 32,
    searchTopK: 3,
    devTasks: 5,
    evalTasks: 40,
    evalK: 1,
    evalTemperature: 0,
    maxTurns: 6,
    maxTokensPerTurn: 512,
    estimateMinutes: 5,
  },
  default: {
    name: "default",
    ...BASE_RECIPE,
    ...AGENT_BASE_START,
    worldSize: "small",
    seed: 1,
    trainSeeds: "101-124",
    maxHops: 2,
    bpeVocab: 2048,
    teachTasks: 2400,
    modelPreset: "micro",
    modelContext: 2048,
    sftSteps: 600,
    sftBatchTokens: 8192,
    distillMaxTokens: 8192,
    sftMaxLength: 2048,
    rlSteps: 48,
    rlGroupSize: 8,
    rlBatchTasks: 4,
    ...MICRO_RL,
    concurrency: 32,
    searchTopK: 3,
    devTasks: 20,
    evalTasks: 200,
    evalK: 1,
    evalTemperature: 0,
    rlEvalK: 4,
    maxTurns: 8,
    maxTokensPerTurn: 512,
    estimateMinutes: 25,
  },
  full: {
    name: "full",
    base: "pretrain",
    ...BASE_RECIPE,
    worldSize: "small",
    seed: 1,
    trainSeeds: "101-124",
    maxHops: 4,
    bpeVocab: 4096,
    teachTasks: 9600,
    modelPreset: "small",
    sftSteps: 2000,
    sftLr: 6e-4,
    sftBatchTokens: 16384,
    distillMaxTokens: 8192,
    sftMaxLength: 2048,
    rlSteps: 60,
    rlGroupSize: 8,
    rlBatchTasks: 4,
    concurrency: 8,
    searchTopK: 3,
    devTasks: 40,
    evalTasks: 453,
    evalK: 4,
    evalTemperature: 1,
    maxTurns: 12,
    maxTokensPerTurn: 512,
    estimateMinutes: 600,
  },
};
