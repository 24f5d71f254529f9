import { z } from "zod";
import { ProfileName } from "../../protocol/index.js";

export const RolloutConfig = z.object({
  temperature: z.number().min(0).default(1),
  topP: z.number().gt(0).max(1).default(1),
  /** The runtime's default too: a final turn (reflection, double check, answer) must fit in one call. */
  maxTokensPerTurn: z.number().int().positive().default(1024),
  maxTurns: z.number().int().positive().default(8),
  /** Cap on a whole completion (model and tool tokens); the overlong buffer counts towards it. */
  maxResponseTokens: z.number().int().positive().default(1024),
  /** Observation text beyond this is cut by the tool (it costs context on every later turn). */
  maxObservationChars: z.number().int().positive().default(2000),
  /** Episodes in flight at once. */
  concurrency: z.number().int().positive().default(4),
  /** Tag set and system prompt; the one the SFT data was rendered with (distill's default is "all"). */
  profile: ProfileName.default("all"),
});

export const RewardConfig = z.object({
  /** Added as `-formatWeight` when the episode broke the protocol (any format error). */
  formatWeight: z.number().min(0).default(0),
  /** DAPO soft overlong punishment over the last `overlongBuffer` tokens before maxResponseTokens. */
  overlongPenalty: z.boolean().default(true),
  overlongBuffer: z.number().int().nonnegative().default(128),
});

export const UpdateConfig = z.object({
  lr: z.number().positive().default(1e-5),
  warmupSteps: z.number().int().nonnegative().default(0),
  /** Passes over each rollout batch. */
  epochs: z.number().int().positive().default(2),
  /** Sequences per optimizer step. */
  miniBatchSize: z.number().int().positive().default(16),
  /** Clip-higher: the ratio is clipped to [1 - clipLow, 1 + clipHigh]. */
  clipLow: z.number().min(0).default(0.2),
  clipHigh: z.number().min(0).default(0.28),
  agg: z.enum(["token-mean", "seq-mean"]).default("token-mean"),
  /** KL penalty towards the rollout policy; off by default as in DAPO. */
  klCoef: z.number().min(0).default(0),
  /** GRPO divides by the group's std; false gives Dr. GRPO's mean-only centering. */
  normalizeStd: z.boolean().default(true),
  /**
   * Multiplies negative advantages (1: GRPO's symmetric update). Below 1 the update leans towards
   * the group's better samples and sharpens the sampled policy (docs/learning.md measures it).
   */
  negativeScale: z.number().min(0).max(1).default(1),
  /**
   * In a better sample, tokens that sampling drew with a probability below this get no advantage:
   * the update pushes up what a success did as the policy would have done it, not its lucky draws
   * (docs/learning.md). Absent: every token takes its sample's advantage.
   */
  positiveMinProb: z.number().gt(0).max(1).optional(),
});

export const RlConfig = z.object({
  /** Checkpoint the policy starts from (e.g. runs/sft/last); `coa train rl` starts the engine from it. */
  from: z.string().optional(),
  /** A task JSONL file (the world's rl split) or a world folder. */
  tasks: z.string(),
  out: z.string(),
  steps: z.number().int().positive().default(50),
  /** Groups per policy batch. */
  batchTasks: z.number().int().positive().default(8),
  /** Samples per task (GRPO's n). */
  groupSize: z.number().int().min(2).default(8),
  /** DAPO dynamic sampling: drop groups whose rewards are all equal and draw more tasks. */
  dynamicSampling: z.boolean().default(true),
  /** Extra rounds of drawing tasks per step when dynamic sampling leaves the batch short. */
  maxRefills: z.number().int().nonnegative().default(3),
  rollout: RolloutConfig.default(RolloutConfig.parse({})),
  reward: RewardConfig.default(RewardConfig.parse({})),
  update: UpdateConfig.default(UpdateConfig.parse({})),
  /**
   * Sequences longer than this (prompt + completion) are left out of the update and counted: the
   * engine's context length (`coa train rl` reads it from the engine when not given).
   */
  maxSequenceTokens: z.number().int().positive().optional(),
  checkpointEvery: z.number().int().positive().default(10),
  keepCheckpoints: z.number().int().positive().default(2),
  seed: z.number().int().default(0),
});
export type RlConfig = z.infer<typeof RlConfig>;
export type RlConfigInput = z.input<typeof RlConfig>;
