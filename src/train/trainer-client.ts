import type { Engine } from "../model/index.js";

/**
 * What the trainers need from the engine. The embedded Engine is one; tests wrap it to inspect
 * every batch sent. `info`: RL reads its prefix cache's counters around each step's rollouts.
 */
export type TrainerClient = Pick<
  Engine,
  "tokenizer" | "trainSft" | "evalSft" | "trainPolicy" | "saveCheckpoint" | "loadCheckpoint" | "info"
>;
