import { DIALECTS, type DialectName, profileIn } from "./dialects.js";
import type { FormatError, Span, Step, StepType } from "./steps.js";
import type { Profile, ProfileName, RoleTag } from "./tags.js";

/**
 * One transition rule of the protocol. Rules are data, not code paths, so the runtime, the
 * distiller, the format reward and the docs all show and check the same list.
 */
export type TransitionRule =
  /** A trajectory's first step is one of `steps`. */
  | { kind: "start"; steps: readonly StepType[]; why: string }
  /**
   * The steps right after an `after` step begin with one of the `next` sequences; an empty `next`
   * means nothing may follow. `whenCheckFails` limits a double_check rule to scores at or below the
   * dialect's re-plan score; `ifEnabled` limits a rule to profiles that enable that role.
   */
  | {
      kind: "next";
      after: StepType;
      whenCheckFails?: true;
      ifEnabled?: RoleTag;
      next: readonly (readonly StepType[])[];
      why: string;
    }
  /** A `step` comes right after one of `after`. */
  | { kind: "previous"; step: StepType; after: readonly StepType[]; why: string }
  /** A finished trajectory ends with `step`. */
  | { kind: "last"; step: StepType; why: string };

/** A double check scoring this or lower sends the model back to planning (this project's dialect). */
export const REPLAN_SCORE = DIALECTS.coa.score.replanAtMost;

export const TRANSITION_RULES: readonly TransitionRule[] = [
  { kind: "start", steps: ["think", "plan"], why: "the model orients itself before it acts" },
  { kind: "next", after: "tool_call", next: [["observation"]], why: "every tool call gets its result next" },
  {
    kind: "previous",
    step: "observation",
    after: ["tool_call"],
    why: "observations are tool results, written by the system",
  },
  {
    kind: "next",
    after: "suggested_answer",
    ifEnabled: "double_check",
    next: [["double_check"]],
    why: "a candidate answer is verified before it becomes final",
  },
  {
    kind: "next",
    after: "double_check",
    whenCheckFails: true,
    next: [["plan"], ["think", "plan"]],
    why: "a failed check sends the model back to planning",
  },
  { kind: "next", after: "answer", next: [], why: "the answer ends the trajectory, so there is only one" },
  { kind: "last", step: "answer", why: "the answer is what gets scored" },
];

export interface ValidateOptions {
  /**
   * The trajectory is finished (default). False for one still being generated: a rule whose
   * required next step has not come yet, and a missing answer, are not errors then.
   */
  complete?: boolean;
  /** Whose rules apply (default `coa`): the roles enabled and the re-plan score. */
  dialect?: DialectName;
}

const shown = (type: StepType): string => (type === "tool_call" ? "a tool call" : `<${type}>`);
const shownSeq = (seq: readonly StepType[]): string => seq.map(shown).join(" then ");
const stepName = (step: Step): string => (step.type === "tool_call" ? `<${step.tool}>` : `<${step.type}>`);

/** One line of plain English per rule, for docs, prompts of teachers and error listings. */
export function describeRule(rule: TransitionRule, dialect: DialectName = "coa"): string {
  switch (rule.kind) {
    case "start":
      return `A trajectory starts with ${rule.steps.map(shown).join(" or ")}: ${rule.why}.`;
    case "previous":
      return `${shown(rule.step)} comes only right after ${rule.after.map(shown).join(" or ")}: ${rule.why}.`;
    case "last":
      return `A finished trajectory ends with ${shown(rule.step)}: ${rule.why}.`;
    case "next": {
      const when = rule.whenCheckFails ? ` scoring ${DIALECTS[dialect].score.replanAtMost} or less` : "";
      const cond = rule.ifEnabled ? ` (profiles with ${shown(rule.ifEnabled)})` : "";
      const next = rule.next.length ? `comes ${rule.next.map(shownSeq).join(" or ")}` : "nothing comes";
      return `After ${shown(rule.after)}${when}${cond} ${next}: ${rule.why}.`;
    }
  }
}

interface Found {
  at: number;
  error: FormatError;
}

/**
 * Checks a step sequence against the profile's tag set and TRANSITION_RULES. Content problems
 * (empty tags, missing fences, unreadable scores) are the parser's to report, not this function's.
 * Errors carry the offending step's span when it has one, else an empty span at 0; messages name
 * the step by its 1-based position.
 */
export function validateTrajectorySteps(
  steps: readonly Step[],
  profile: ProfileName,
  opts: ValidateOptions = {},
): FormatError[] {
  const dialect = opts.dialect ?? "coa";
  const p = profileIn(profile, dialect);
  const complete = opts.complete ?? true;
  const found: Found[] = [];
  const fail = (at: number, kind: FormatError["kind"], message: string) => {
    const span: Span = steps[at]?.span ?? { start: 0, end: 0 };
    found.push({ at, error: { kind, message: `step ${at + 1}: ${message}`, span } });
  };
  steps.forEach((step, i) => {
    if (!enabledIn(p, step)) fail(i, "disabled_tag", `${stepName(step)} is not enabled in profile ${p.name}`);
  });
  for (const rule of TRANSITION_RULES) {
    for (const [at, message] of breaches(rule, steps, p, complete, dialect))
      fail(at, "bad_transition", message);
  }
  return found.sort((a, b) => a.at - b.at).map((f) => f.error);
}

function enabledIn(p: Profile, step: Step): boolean {
  if (step.type === "tool_call") return p.tools.includes(step.tool);
  return step.type === "observation" || p.roles.includes(step.type);
}

/** Where a rule is broken: [step index, message] pairs. */
function breaches(
  rule: TransitionRule,
  steps: readonly Step[],
  p: Profile,
  complete: boolean,
  dialect: DialectName,
): [number, string][] {
  const out: [number, string][] = [];
  const describe = (r: TransitionRule) => describeRule(r, dialect);
  switch (rule.kind) {
    case "start":
      if (steps.length > 0 && !rule.steps.includes(steps[0].type))
        out.push([0, `starts with ${stepName(steps[0])}; ${describe(rule)}`]);
      break;
    case "last": {
      const last = steps.at(-1);
      if (complete && last?.type !== rule.step)
        out.push([
          Math.max(steps.length - 1, 0),
          `${last ? `ends with ${stepName(last)}` : "no steps"}; ${describe(rule)}`,
        ]);
      break;
    }
    case "previous":
      steps.forEach((step, i) => {
        const prev = steps[i - 1];
        if (step.type === rule.step && !(prev && rule.after.includes(prev.type)))
          out.push([i, `${stepName(step)} after ${prev ? stepName(prev) : "nothing"}; ${describe(rule)}`]);
      });
      break;
    case "next":
      if (rule.ifEnabled && !p.roles.includes(rule.ifEnabled)) break;
      steps.forEach((step, i) => {
        const atMost = rule.whenCheckFails ? DIALECTS[dialect].score.replanAtMost : undefined;
        if (step.type !== rule.after || !scoreApplies(atMost, step)) return;
        const ok =
          rule.next.length === 0
            ? i + 1 >= steps.length
            : rule.next.some((seq) => continuesWith(steps, i + 1, seq, complete));
        if (ok) return;
        const got = steps[i + 1];
        out.push([
          got ? i + 1 : i,
          `${got ? stepName(got) : "nothing"} after ${stepName(step)}; ${describe(rule)}`,
        ]);
      });
      break;
  }
  return out;
}

function scoreApplies(atMost: number | undefined, step: Step): boolean {
  if (atMost === undefined) return true;
  return step.type === "double_check" && step.score !== null && step.score <= atMost;
}

/** Whether steps[from..] begins with `seq` (or, for an unfinished trajectory, with a prefix of it). */
function continuesWith(
  steps: readonly Step[],
  from: number,
  seq: readonly StepType[],
  complete: boolean,
): boolean {
  for (let k = 0; k < seq.length; k++) {
    const step = steps[from + k];
    if (!step) return !complete;
    if (step.type !== seq[k]) return false;
  }
  return true;
}
