import type { FormatError } from "../protocol/index.js";

// What the runtime tells the model inside an <observation> about its own output (tool-call wording
// lives with ToolCaller in src/tools). Kept short: every character is context the model pays for on
// each later turn.

export function formatFeedback(errors: readonly FormatError[]): string {
  const lines = errors.slice(0, 5).map((e) => `- ${e.message}`);
  if (errors.length > 5) lines.push(`- and ${errors.length - 5} more`);
  return `Format error in your last output:\n${lines.join("\n")}\nWrite it again, each step inside its tag.`;
}

export const NO_ACTION_MESSAGE = "you stopped without calling a tool or writing <answer>";
