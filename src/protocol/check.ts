import { type ParseOptions, parseCoa } from "./parser.js";
import { type ValidateOptions, validateTrajectorySteps } from "./rules.js";
import type { FormatError, Step } from "./steps.js";
import type { ProfileName } from "./tags.js";

export interface FormatCheck {
  ok: boolean;
  steps: Step[];
  /** Parser errors and rule breaches, by position. */
  errors: FormatError[];
}

/**
 * Parse plus validate, as the format reward and `coa validate` need it. The profile is checked by
 * the validator only, so a disabled tag is reported once.
 */
export function checkFormat(
  text: string,
  profile: ProfileName,
  opts: Omit<ParseOptions, "profile"> & ValidateOptions = {},
): FormatCheck {
  const { steps, errors } = parseCoa(text, { modelOutput: opts.modelOutput, dialect: opts.dialect });
  const validated = validateTrajectorySteps(steps, profile, {
    complete: opts.complete,
    dialect: opts.dialect,
  });
  const all = [...errors, ...validated];
  all.sort((a, b) => a.span.start - b.span.start);
  return { ok: all.length === 0, steps, errors: all };
}
