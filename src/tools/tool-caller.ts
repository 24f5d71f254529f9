import type { ToolTag } from "../protocol/index.js";
import { badArgs, repeatedCall, toolCrashed, toolTimedOut, unavailableTool } from "./call-feedback.js";
import { errorMessage, truncateText, withDeadline } from "./guard.js";
import type { Observation, Tool } from "./types.js";

export interface ToolCallOutcome {
  observation: Observation;
  /** Answered from memory: the same tool with the same normalized arguments ran before. */
  duplicate: boolean;
}

export interface ToolCallLimits {
  timeoutMs: number;
  maxChars: number;
  goal: string;
  signal?: AbortSignal;
}

/** A call whose arguments parsed: ready to run. */
export interface PreparedCall {
  tool: Tool<unknown>;
  args: unknown;
  key: string;
}

/**
 * Runs a model's (or an agent's) tool calls so that nothing a tool does can end the episode: unknown
 * tools, bad arguments, exceptions and timeouts all come back as observations. Successful results
 * are remembered, so a repeated call is answered from memory with a note instead of running again.
 * One per episode. The runtime and the teacher both call tools through it, so the observations a
 * student is distilled from are worded as the ones it reads at inference.
 */
export class ToolCaller {
  private readonly memory = new Map<string, Observation>();

  // biome-ignore lint/suspicious/noExplicitAny: each tool has its own argument type
  constructor(private readonly tools: ReadonlyMap<ToolTag, Tool<any>>) {}

  /** Parses the raw arguments; returns the failure observation instead when the call cannot run. */
  prepare(tag: ToolTag, raw: string): PreparedCall | Observation {
    const tool = this.tools.get(tag);
    if (!tool) return failure(unavailableTool(tag), "unavailable");
    try {
      const args = tool.parseArgs(raw);
      return { tool, args, key: callKey(tag, args) };
    } catch (err) {
      return failure(badArgs(tag, errorMessage(err)), "bad_args");
    }
  }

  async run(prepared: PreparedCall, limits: ToolCallLimits): Promise<ToolCallOutcome> {
    const earlier = this.memory.get(prepared.key);
    if (earlier)
      return {
        observation: { ...earlier, text: repeatedCall(prepared.tool.tag, earlier.text), elapsedMs: 0 },
        duplicate: true,
      };
    const observation = await runGuarded(prepared.tool, prepared.args, limits);
    if (observation.ok) this.memory.set(prepared.key, observation);
    return { observation, duplicate: false };
  }

  /** `prepare` then `run`, for a caller with nothing to do between the two. */
  async call(tag: ToolTag, raw: string, limits: ToolCallLimits): Promise<ToolCallOutcome> {
    const prepared = this.prepare(tag, raw);
    if (!("tool" in prepared)) return { observation: prepared, duplicate: false };
    return this.run(prepared, limits);
  }
}

/** Same tool and same arguments up to whitespace (and, outside code, letter case). */
function callKey(tag: ToolTag, args: unknown): string {
  const json = JSON.stringify(args ?? null).replace(/\s+/g, " ");
  return `${tag}\u0000${tag === "code" ? json : json.toLowerCase()}`;
}

/**
 * Tools are asked to enforce their own timeout and output cap; this holds them to it anyway, since
 * callers also run tools they did not write. No grace past the deadline: it may be the episode's.
 */
async function runGuarded(tool: Tool<unknown>, args: unknown, limits: ToolCallLimits): Promise<Observation> {
  const started = performance.now();
  const { timeoutMs, maxChars, goal } = limits;
  return withDeadline(
    limits,
    0,
    async (signal) => {
      try {
        return capped(await tool.run(args, { signal, timeoutMs, maxChars, goal }), maxChars);
      } catch (err) {
        return failure(toolCrashed(tool.tag, errorMessage(err)), "tool_error", performance.now() - started);
      }
    },
    () => failure(toolTimedOut(tool.tag, timeoutMs), "timeout", performance.now() - started),
  );
}

/** Holds a tool to the output cap with the tools' own truncation marker. */
function capped(observation: Observation, maxChars: number): Observation {
  const { text, truncated } = truncateText(observation.text, maxChars);
  return truncated ? { ...observation, text, truncated } : observation;
}

function failure(text: string, error: string, elapsedMs = 0): Observation {
  return { text, ok: false, error, truncated: false, elapsedMs };
}
