import type { Step } from "./steps.js";
import { closeTag, OBSERVATION_TAG, openTag, type Tag } from "./tags.js";

/** What goes between two rendered steps; the runtime's observation segments use it too. */
export const STEP_SEPARATOR = "\n";

const tagOf = (step: Step): Tag => (step.type === "tool_call" ? step.tool : step.type);
const contentOf = (step: Step): string => (step.type === "tool_call" ? step.args : step.text);

/**
 * One step as the model writes it: `<tag>content</tag>`. Content that contains the element's own
 * closing tag (a crawled page quoting `</observation>`, say) gets it defused as `<\/tag>`, so the
 * element cannot end early; all other content is written as is.
 */
export function renderStep(step: Step): string {
  const tag = tagOf(step);
  const close = closeTag(tag);
  const content = contentOf(step).replaceAll(close, `<\\/${tag}>`);
  return `${openTag(tag)}${content}${close}`;
}

/** Steps joined by STEP_SEPARATOR: for valid steps, `parseCoa(renderSteps(s)).steps` equals `s` up to spans. */
export function renderSteps(steps: readonly Step[]): string {
  return steps.map(renderStep).join(STEP_SEPARATOR);
}

/**
 * The text the runtime appends after a tool call's closing tag: the observation between two
 * separators. A trajectory built this way reads exactly like `renderSteps` of its steps.
 */
export function renderObservation(text: string): string {
  return `${STEP_SEPARATOR}${renderStep({ type: OBSERVATION_TAG, text })}${STEP_SEPARATOR}`;
}
