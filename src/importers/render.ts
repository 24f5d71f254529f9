import type { CallInput } from "./generic.js";

/** One content part or message content, as text: string parts joined, anything else as JSON. */
function contentText(content: unknown): string {
  if (typeof content === "string") return content;
  if (Array.isArray(content))
    return content
      .map((part) => {
        if (typeof part === "string") return part;
        const p = part as Record<string, unknown>;
        return typeof p.text === "string" ? p.text : JSON.stringify(part);
      })
      .join("");
  return content === undefined || content === null ? "" : JSON.stringify(content);
}

/**
 * One chat item as a model reads it. Messages are their role and text; tool calls and results (in
 * the Responses or Chat Completions shape) their name, arguments and output. Whatever else a
 * framework puts in its history is counted as its JSON, so nothing it sends goes uncounted.
 */
export function renderItem(item: Record<string, unknown>): string {
  const type = item.type ?? (item.role ? "message" : undefined);
  if (type === "message" || (item.role && item.content !== undefined)) {
    const calls = Array.isArray(item.tool_calls)
      ? (item.tool_calls as Record<string, unknown>[]).map((c) =>
          renderItem({ type: "function_call", ...(c.function as object) }),
        )
      : [];
    return [`${String(item.role)}: ${contentText(item.content)}`, ...calls].join("\n");
  }
  if (type === "function_call") return `call ${String(item.name)}(${contentText(item.arguments)})`;
  if (type === "function_call_result" || type === "function_call_output")
    return `result: ${contentText(item.output)}`;
  return JSON.stringify(item);
}

/**
 * The text a model call reads: its tool definitions (schemas included) and its messages, in the order
 * a chat template lays them out. Every side of the cost comparison is counted from text made this
 * way or from its own rendered context, in one tokenizer.
 */
export function renderCall(input: CallInput, tools: readonly Record<string, unknown>[]): string {
  const defs = tools.map((t) => `tool: ${JSON.stringify(t)}`);
  const messages = typeof input === "string" ? [input] : input.map(renderItem);
  return [...defs, ...messages].join("\n\n");
}
