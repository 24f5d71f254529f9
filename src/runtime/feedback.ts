import type { FormatError, ToolTag } from "../protocol/index.js";

// What the runtime tells the model inside an <observation> when something went wrong. Kept short:
// every character is context the model pays for on each later turn.

export function formatFeedback(errors: readonly FormatError[]): string {
  const lines = errors.slice(0, 5).map((e) => `- ${e.message}`);
  if (errors.length > 5) lines.push(`- and ${errors.length - 5} more`);
  return `Format error in your last output:\n${lines.join("\n")}\nWrite it again, each step inside its tag.`;
}

export const NO_ACTION_MESSAGE = "you stopped without calling a tool or writing <answer>";

export const unavailableTool = (tool: ToolTag) => `No <${tool}> tool is available in this run.`;

export const badArgs = (tool: ToolTag, message: string) => `Your <${tool}> call could not be run: ${message}`;

export const toolCrashed = (tool: ToolTag, message: string) => `<${tool}> failed: ${message}`;

export const toolTimedOut = (tool: ToolTag, ms: number) => `<${tool}> timed out after ${Math.round(ms)} ms.`;

export const repeatedCall = (tool: ToolTag, earlier: string) =>
  `(Repeated call: <${tool}> already ran with these arguments; its earlier result follows. Try something different.)\n${earlier}`;
