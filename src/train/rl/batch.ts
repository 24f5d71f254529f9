import type { PolicySequence } from "../../model/index.js";
import { completionIds, lossMask, type Trajectory } from "../../protocol/index.js";
import { shuffled } from "../seeds.js";
import { tokenAdvantage } from "./advantages.js";

/**
 * The policy-gradient record of one episode, token-exact: the ids as generated, loss only on model
 * tokens, the sampling-time logprob of each model token, and the episode's advantage on each
 * trainable token as `tokenAdvantage` lays it (0 on prompt and tool tokens).
 */
export function policySequence(
  t: Trajectory,
  advantage: number,
  positiveMinProb?: number,
): PolicySequence & { advantages: number[]; old_logprobs: number[] } {
  const prompt = t.promptIds.map(() => 0);
  const mask = [...prompt, ...lossMask(t)];
  const old = [...prompt];
  for (const s of t.segments) {
    if (s.source === "tool") {
      old.push(...s.ids.map(() => 0));
    } else {
      if (!s.logprobs || s.logprobs.length !== s.ids.length)
        throw new Error(
          `trajectory ${t.id}: a model segment has ${s.logprobs?.length ?? 0} logprobs for ${s.ids.length} ids; rollouts must record sampling logprobs`,
        );
      old.push(...s.logprobs);
    }
  }
  return {
    input_ids: [...t.promptIds, ...completionIds(t)],
    loss_mask: mask,
    advantages: mask.map((m, i) => (m ? tokenAdvantage(advantage, old[i], positiveMinProb) : 0)),
    old_logprobs: old,
  };
}

/** The mini-batches of one update epoch: a seeded shuffle cut into runs of `size`. */
export function miniBatches<T>(items: readonly T[], size: number, seed: number): T[][] {
  const order = shuffled(items, seed);
  const out: T[][] = [];
  for (let i = 0; i < order.length; i += size) out.push(order.slice(i, i + size));
  return out;
}
