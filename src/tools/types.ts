import type { z } from "zod";
import type { ToolTag } from "../protocol/index.js";

/** What a tool call produced. A failure is an observation too: the model reads it and reacts. */
export interface Observation {
  text: string;
  ok: boolean;
  /** Short machine-readable cause when !ok, e.g. "timeout", "sandbox_refused", "http_500". */
  error?: string;
  truncated: boolean;
  elapsedMs: number;
}

export interface ToolContext {
  signal?: AbortSignal;
  /** Wall-clock limit for this call; tools enforce it themselves. */
  timeoutMs: number;
  /** Observation text longer than this is cut, with a marker saying how much was dropped. */
  maxChars: number;
  /** The question being worked on, for goal-directed tools (crawl summaries). */
  goal?: string;
}

/**
 * A tool agent behind a protocol tool tag. `parseArgs` turns the raw text the model wrote between
 * the tags into typed arguments (throwing a ToolArgsError with a message the model can act on).
 */
export interface Tool<A = unknown> {
  readonly tag: ToolTag;
  readonly description: string;
  readonly argsSchema: z.ZodType<A>;
  parseArgs(raw: string): A;
  run(args: A, ctx: ToolContext): Promise<Observation>;
  /**
   * Starts what the first call would otherwise start and wait for (the code tool: the sandbox's check
   * and its launcher), so that a long run can have it ready while its model loads (`prepareToolset`).
   * A failure here is left to the first call, which reports it.
   */
  prepare?(): Promise<void>;
}

export class ToolArgsError extends Error {
  override name = "ToolArgsError";
}
