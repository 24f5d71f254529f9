import { checkFormat, type DialectName, type ProfileName } from "../protocol/index.js";
import { type Score, scored } from "./score.js";

export interface FormatRewardOptions {
  /** The text is raw model output (no runtime-injected observations), so an <observation> in it is forged. */
  modelOutput?: boolean;
  /** The trajectory is finished; false accepts a prefix still being generated. */
  complete?: boolean;
  /** Whose rules the text follows (default `coa`): AFM models are judged by their own. */
  dialect?: DialectName;
}

/** 1 when a trajectory text parses and obeys the protocol's transition rules, with the error count recorded. */
export function formatReward(text: string, profile: ProfileName, opts: FormatRewardOptions = {}): Score {
  const check = checkFormat(text, profile, opts);
  return scored("format", check.ok, { formatErrors: check.errors.length, steps: check.steps.length });
}
