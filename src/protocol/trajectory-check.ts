import { answerOf } from "./dialects.js";
import { parseCoa } from "./parser.js";
import { renderPrompt } from "./prompts.js";
import { validateTrajectorySteps } from "./rules.js";
import type { FormatErrorKind, Span, Step } from "./steps.js";
import type { ProfileName } from "./tags.js";
import type { Trajectory } from "./trajectory.js";

/** One thing wrong with a trajectory record; `field` names where, e.g. "segments[3]" or "promptIds". */
export interface TrajectoryProblem {
  field: string;
  /** Set for problems in the completion's format. */
  kind?: FormatErrorKind;
  /** Characters of the completion text the problem is about. */
  span?: Span;
  message: string;
}

export interface TrajectoryCheck {
  /** The completion text decoded segment by segment. */
  text: string;
  steps: Step[];
  problems: TrajectoryProblem[];
}

/**
 * Checks a token-exact trajectory against the protocol, given the decoder of its vocabulary:
 * the prompt is `renderPrompt` of its question, the completion parses and follows the transition
 * rules (an answer is required only when it finished with one), the loss mask is right (the tool
 * segments are exactly the observations), logprobs align with ids, and `answer` is the
 * `<answer>` text (the boxed content in a boxed dialect). The record's `dialect` sets the rules;
 * `profile` overrides the record's own for the completion's checks.
 */
export function checkTrajectory(
  t: Trajectory,
  decode: (ids: readonly number[]) => string,
  opts: { profile?: ProfileName } = {},
): TrajectoryCheck {
  const profile = opts.profile ?? t.profile;
  const problems: TrajectoryProblem[] = [];
  const decoded = (field: string, ids: readonly number[]): string | null => {
    try {
      return decode(ids);
    } catch (err) {
      problems.push({ field, message: `cannot decode: ${err instanceof Error ? err.message : String(err)}` });
      return null;
    }
  };

  const { dialect } = t;
  const prompt = decoded("promptIds", t.promptIds);
  // The prompt is what the model saw, so it is checked against the record's own profile. One made
  // by a chat template or from a supplied system prompt cannot be rebuilt here.
  const rebuildable = !t.promptFormat?.chatTemplate && !t.promptFormat?.customSystemPrompt;
  const expected = renderPrompt({ profile: t.profile, question: t.question, dialect });
  if (rebuildable && prompt !== null && prompt !== expected)
    problems.push({
      field: "promptIds",
      message: `decoded prompt differs from renderPrompt at character ${firstDifference(prompt, expected)}`,
    });

  // Character range of each segment in the completion text.
  const ranges: { start: number; end: number }[] = [];
  let text = "";
  t.segments.forEach((segment, i) => {
    const field = `segments[${i}]`;
    if (segment.source === "model" && segment.logprobs && segment.logprobs.length !== segment.ids.length)
      problems.push({
        field: `${field}.logprobs`,
        message: `${segment.logprobs.length} logprobs for ${segment.ids.length} ids`,
      });
    const part = decoded(field, segment.ids) ?? "";
    ranges.push({ start: text.length, end: text.length + part.length });
    text += part;
    if (segment.source === "tool") {
      const alone = parseCoa(part);
      if (alone.errors.length > 0 || alone.steps.length !== 1 || alone.steps[0].type !== "observation")
        problems.push({ field, message: "a tool segment must hold exactly one <observation> element" });
    }
  });

  const { steps, errors } = parseCoa(text, { dialect });
  const located = (span: { start: number; end: number }) => {
    const i = ranges.findIndex((r) => span.start >= r.start && span.start < r.end);
    return i < 0 ? "segments" : `segments[${i}]`;
  };
  for (const step of steps) {
    if (step.type !== "observation") continue;
    const i = ranges.findIndex((r) => step.span!.start >= r.start && step.span!.end <= r.end);
    if (i < 0 || t.segments[i].source !== "tool")
      problems.push({
        field: located(step.span!),
        kind: "model_wrote_observation",
        span: step.span,
        message: "an <observation> outside a tool segment would be trained on as model output",
      });
  }
  const complete = t.finishReason === "answer";
  for (const e of [...errors, ...validateTrajectorySteps(steps, profile, { complete, dialect })])
    problems.push({ field: located(e.span), kind: e.kind, span: e.span, message: e.message });

  const last = steps.at(-1);
  if (complete && last?.type === "answer" && t.answer?.trim() !== answerOf(last.text, dialect))
    problems.push({ field: "answer", message: `${JSON.stringify(t.answer)} is not the <answer> text` });
  return { text, steps, problems };
}

function firstDifference(a: string, b: string): number {
  let i = 0;
  while (i < a.length && i < b.length && a[i] === b[i]) i++;
  return i;
}
