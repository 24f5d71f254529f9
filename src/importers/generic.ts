import { z } from "zod";

/**
 * The generic trace format, one JSON object per line: what `coa import --from generic` reads, and the
 * form the other importers bring their framework's traces into before the MAS trace is built.
 * docs/import.md documents it field by field.
 */

/** A model's context, as the framework sent it: one text, or chat messages and tool definitions. */
export const CallInput = z.union([z.string(), z.array(z.record(z.string(), z.unknown()))]);
export type CallInput = z.infer<typeof CallInput>;

export const LlmStep = z.object({
  type: z.literal("llm"),
  /** The agent the call was made for. */
  agent: z.string(),
  /** Everything the model read; null when the framework left it out (sensitive data off). */
  input: CallInput.nullable(),
  /** Tool (and agent-as-tool, handoff) definitions sent with the call; they are read as input too. */
  tools: z.array(z.record(z.string(), z.unknown())).default([]),
  /** The text the model wrote; null when left out. Tool calls it made follow as their own steps. */
  output: z.string().nullable(),
  /** What the model wrote besides text (its tool calls), as sent back, for counting output tokens. */
  outputCalls: z.array(z.string()).default([]),
  model: z.string().optional(),
});
export type LlmStep = z.infer<typeof LlmStep>;

export const ToolStep = z.object({
  type: z.literal("tool"),
  /** The agent that called the tool. */
  agent: z.string(),
  tool: z.string(),
  /** The arguments: a JSON text or object as the model wrote it; null when left out. */
  arguments: z.union([z.string(), z.record(z.string(), z.unknown())]).nullable(),
  /** The tool's result as the model was given it; null when left out. */
  result: z.string().nullable(),
  /** Set when the tool failed. */
  error: z.string().nullable().default(null),
});
export type ToolStep = z.infer<typeof ToolStep>;

/** Work given to another agent: an agent used as a tool (with its input) or a handoff (none). */
export const DelegateStep = z.object({
  type: z.literal("delegate"),
  from: z.string(),
  to: z.string(),
  input: z.string().nullable(),
});
export type DelegateStep = z.infer<typeof DelegateStep>;

/** The end of an agent's turn: its final output, handed back to the agent (or user) that called it. */
export const ReturnStep = z.object({
  type: z.literal("return"),
  agent: z.string(),
  output: z.string().nullable(),
});
export type ReturnStep = z.infer<typeof ReturnStep>;

export const GenericStep = z.discriminatedUnion("type", [LlmStep, ToolStep, DelegateStep, ReturnStep]);
export type GenericStep = z.infer<typeof GenericStep>;

export const GenericTrace = z.object({
  format: z.literal("coa-generic/1"),
  traceId: z.string(),
  /** Joins the trace to its task in `--tasks`; without it, the first user message's text does. */
  taskId: z.string().nullable().default(null),
  /** The user's request, when it is not the first user message of the first call. */
  question: z.string().nullable().default(null),
  /** The agent the user talked to; its return is the final answer. Default: the first step's agent. */
  rootAgent: z.string().nullable().default(null),
  steps: z.array(GenericStep),
  wallMs: z.number().nonnegative().default(0),
});
export type GenericTrace = z.infer<typeof GenericTrace>;
