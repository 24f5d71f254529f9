import { z } from "zod";
import { lastBoxed } from "./boxed.js";
import { PROFILES, type Profile, type ProfileName, type RoleTag } from "./tags.js";

export const DialectName = z.enum(["coa", "afm-web", "afm-mhqa", "afm-code"]);
export type DialectName = z.infer<typeof DialectName>;

/**
 * How a model was trained to write the protocol. The released AFM agents each follow rules of their
 * own; reading their output by ours would misjudge correct steps, so the parser, the transition
 * rules, the runtime, the distiller's checks and the format reward all read this one table.
 */
export interface Dialect {
  readonly name: DialectName;
  /** Who trained on it, in a few words (for `--help` and docs). */
  readonly about: string;
  /** Role tags the model writes; undefined keeps the profile's. Tools always come from the profile. */
  readonly roles?: readonly RoleTag[];
  /** A double check ends with a score from 1 to `max`; `replanAtMost` or less sends it back to planning. */
  readonly score: { readonly max: number; readonly replanAtMost: number };
  /**
   * What `<answer>` holds: `boxed` answers sit in `\boxed{…}` (the answer is its content);
   * `separator` splits several answers in one element.
   */
  readonly answer: { readonly boxed: boolean; readonly separator?: string };
  /**
   * How the system prompt and the question become chat messages when a chat template is used:
   * `system-user` sends them as two messages; `user` puts both in one user message (`system` +
   * "\n\nQuestion: " + question), as AFM's training data did, leaving the template's own system turn.
   */
  readonly chat: "system-user" | "user";
}

const AFM_SCORE = { max: 4, replanAtMost: 2 } as const;

export const DIALECTS: Readonly<Record<DialectName, Dialect>> = {
  coa: {
    name: "coa",
    about: "this project's own rules",
    score: { max: 5, replanAtMost: 2 },
    answer: { boxed: false },
    chat: "system-user",
  },
  "afm-web": {
    name: "afm-web",
    about: "AFM web agent: double check scored 1-4, answered at 3 or more",
    roles: ["think", "plan", "reflection", "suggested_answer", "double_check", "answer"],
    score: AFM_SCORE,
    answer: { boxed: false },
    chat: "user",
  },
  "afm-mhqa": {
    name: "afm-mhqa",
    about: "AFM multi-hop QA agent: reflection, no suggested answer, several answers joined by |",
    roles: ["think", "plan", "reflection", "answer"],
    score: AFM_SCORE,
    answer: { boxed: false, separator: "|" },
    chat: "user",
  },
  "afm-code": {
    name: "afm-code",
    about: "AFM code agent: reflection, the answer in \\boxed{}",
    roles: ["think", "plan", "reflection", "answer"],
    score: AFM_SCORE,
    answer: { boxed: true },
    chat: "user",
  },
};

export const dialectOf = (name: DialectName = "coa"): Dialect => DIALECTS[name];

/** The tag set a profile has under a dialect: the dialect's roles, the profile's tools. */
export function profileIn(profile: ProfileName, dialect: DialectName = "coa"): Profile {
  const p = PROFILES[profile];
  const roles = DIALECTS[dialect].roles;
  return roles ? { ...p, roles } : p;
}

/**
 * The answer an `<answer>` element gives under a dialect: the content of its last `\boxed{}` where
 * answers are boxed (the text as written when there is no box; the format check reports that),
 * else the text itself.
 */
export function answerOf(text: string, dialect: DialectName = "coa"): string {
  if (!DIALECTS[dialect].answer.boxed) return text;
  return lastBoxed(text)?.trim() ?? text;
}

/** The separate answers an answer holds: split on the dialect's separator, if it has one. */
export function answerParts(answer: string, dialect: DialectName = "coa"): string[] {
  const sep = DIALECTS[dialect].answer.separator;
  const parts = sep ? answer.split(sep) : [answer];
  return parts.map((p) => p.trim()).filter((p) => p !== "");
}

/** Why an answer's content breaks the dialect's form, or null when it is fine. */
export function answerProblem(text: string, dialect: DialectName = "coa"): string | null {
  if (DIALECTS[dialect].answer.boxed && lastBoxed(text) === null)
    return `<answer> must hold its answer in \\boxed{} (dialect ${dialect})`;
  return null;
}
