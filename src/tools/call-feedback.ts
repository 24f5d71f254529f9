import type { ToolTag } from "../protocol/index.js";

// What a tool call comes back as when it did not run cleanly, worded once for every caller (the
// runtime and the teacher): a student trained on the teacher's traces then reads at inference the
// words it learned. Kept short: every character is context the model pays for on each later turn.

export const unavailableTool = (tool: ToolTag) => `No <${tool}> tool is available in this run.`;

export const badArgs = (tool: ToolTag, message: string) => `Your <${tool}> call could not be run: ${message}`;

export const toolCrashed = (tool: ToolTag, message: string) => `<${tool}> failed: ${message}`;

export const toolTimedOut = (tool: ToolTag, ms: number) => `<${tool}> timed out after ${Math.round(ms)} ms.`;

export const repeatedCall = (tool: ToolTag, earlier: string) =>
  `(Repeated call: <${tool}> already ran with these arguments; its earlier result follows. Try something different.)\n${earlier}`;
