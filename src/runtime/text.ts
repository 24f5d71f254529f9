import type { Tokenizer } from "../model/index.js";
import { completionIds, type Trajectory } from "../protocol/index.js";

/** The text views of a record, derived from its ids (never the reverse). */
export function trajectoryText(
  trajectory: Pick<Trajectory, "promptIds" | "segments">,
  tokenizer: Pick<Tokenizer, "decode">,
): { prompt: string; completion: string } {
  return {
    prompt: tokenizer.decode(trajectory.promptIds),
    completion: tokenizer.decode(completionIds(trajectory)),
  };
}
