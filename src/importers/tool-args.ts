import { extractCode, renderCodeArgs, type ToolTag } from "../protocol/index.js";

// Argument names frameworks' tools commonly use, per CoA tool; the first present string wins.
const FIELDS: Readonly<Record<ToolTag, readonly string[]>> = {
  web_search: ["query", "q", "search", "search_query", "text", "input"],
  wiki_search: ["query", "q", "search", "title", "text", "input"],
  crawl_page: ["url", "urls", "link", "page", "href", "input"],
  code: ["code", "program", "source", "script", "python", "input"],
};

function parseArgs(args: string | Record<string, unknown>): Record<string, unknown> | string {
  if (typeof args !== "string") return args;
  try {
    const parsed: unknown = JSON.parse(args);
    if (parsed && typeof parsed === "object" && !Array.isArray(parsed))
      return parsed as Record<string, unknown>;
  } catch {
    // Not JSON: a tool that takes plain text.
  }
  return args;
}

function pick(obj: Record<string, unknown>, tag: ToolTag): string | null {
  for (const f of FIELDS[tag]) {
    const v = obj[f];
    if (typeof v === "string") return v;
    if (Array.isArray(v) && v.every((x) => typeof x === "string")) return v.join(" | ");
  }
  const strings = Object.values(obj).filter((v): v is string => typeof v === "string");
  return strings.length === 1 ? strings[0] : null;
}

/**
 * A framework tool call's arguments as the CoA tool tag holds them: the query, the URLs joined by
 * " | ", or the program in a python fence. Null when no argument fits the tag.
 */
export function coaToolArgs(tag: ToolTag, args: string | Record<string, unknown>): string | null {
  const parsed = parseArgs(args);
  const text = typeof parsed === "string" ? parsed : pick(parsed, tag);
  if (text === null) return null;
  if (tag !== "code" || extractCode(text)) return text.trim();
  const stdin = typeof parsed === "object" && typeof parsed.stdin === "string" ? parsed.stdin : undefined;
  return renderCodeArgs(stdin === undefined ? { code: text } : { code: text, stdin });
}
