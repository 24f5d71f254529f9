import { z } from "zod";
import { ToolTag } from "./tags.js";

/** Half-open character range [start, end) into the text the step was parsed from. */
export const Span = z.object({ start: z.number().int().nonnegative(), end: z.number().int().nonnegative() });
export type Span = z.infer<typeof Span>;

const textStep = <T extends string>(type: T) =>
  z.object({ type: z.literal(type), text: z.string(), span: Span.optional() });

export const ThinkStep = textStep("think");
export const PlanStep = textStep("plan");
export const ReflectionStep = textStep("reflection");
export const SuggestedAnswerStep = textStep("suggested_answer");
export const AnswerStep = textStep("answer");
export const ObservationStep = textStep("observation");
/** A verifier's self-check; `score` is the rating it ends with (1–5, or 1–4 in AFM dialects), null when none could be read. */
export const DoubleCheckStep = textStep("double_check").extend({
  score: z.number().int().min(0).max(5).nullable(),
});
/** `args` is the raw text between the tags, as the model wrote it (for `code`, the fenced block included). */
export const ToolCallStep = z.object({
  type: z.literal("tool_call"),
  tool: ToolTag,
  args: z.string(),
  span: Span.optional(),
});

export const Step = z.discriminatedUnion("type", [
  ThinkStep,
  PlanStep,
  ReflectionStep,
  SuggestedAnswerStep,
  DoubleCheckStep,
  AnswerStep,
  ToolCallStep,
  ObservationStep,
]);
export type Step = z.infer<typeof Step>;
export type StepType = Step["type"];

export const FormatErrorKind = z.enum([
  "unclosed_tag",
  "stray_text",
  "nested_tag",
  "unknown_tag",
  "unexpected_close",
  "missing_code_fence",
  "empty_tag",
  "bad_score",
  /** An `<answer>` whose content breaks the dialect's answer form (no `\\boxed{}` where one is required). */
  "bad_answer",
  "model_wrote_observation",
  "disabled_tag",
  "bad_transition",
  /** The runtime's: a budget ended the episode while the model was still writing a turn. */
  "truncated_turn",
]);
export type FormatErrorKind = z.infer<typeof FormatErrorKind>;

/** A problem found in model text; parsing never throws, it reports these instead. */
export const FormatError = z.object({
  kind: FormatErrorKind,
  message: z.string(),
  span: Span,
});
export type FormatError = z.infer<typeof FormatError>;
