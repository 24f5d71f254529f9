import { type RowRef, TaskLoadError } from "./load-error.js";

/** Deepest nesting a row may have; task rows are a few levels deep, and deeper data overflows the stack of every recursive walk after JSON.parse (stringify, zod, structuredClone). */
export const MAX_JSON_DEPTH = 100;

/** Index of the bracket that opens level `max + 1` of a JSON text, or -1; one linear pass, no recursion. */
export function tooDeepAt(text: string, max: number): number {
  let depth = 0;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (inString) {
      if (c === 0x5c)
        i++; // backslash: skip the escaped character
      else if (c === 0x22) inString = false;
    } else if (c === 0x22) inString = true;
    else if (c === 0x5b || c === 0x7b) {
      if (++depth > max) return i;
    } else if (c === 0x5d || c === 0x7d) depth--;
  }
  return -1;
}

const tooDeep = (max: number) => `nested deeper than ${max} levels`;

/** Fails on a file with no rows at all, saying whether it is empty or only blank. */
export function requireContent(file: string, text: string): void {
  if (text.length === 0) throw new TaskLoadError(null, null, "file is empty", file);
  if (!text.trim()) throw new TaskLoadError(null, null, "file has only blank lines, no rows", file);
}

/** Non-blank lines of a JSONL text with their 1-based line numbers; each is parsed only when used. */
export function* jsonlLines(file: string, text: string): Generator<{ ref: RowRef; row: string }> {
  const lines = text.split("\n");
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i]!.trim();
    if (line) yield { ref: { file, unit: "line", n: i + 1 }, row: line };
  }
}

export function parseJsonLine(line: string, ref: RowRef): unknown {
  if (tooDeepAt(line, MAX_JSON_DEPTH) >= 0) throw new TaskLoadError(ref, null, tooDeep(MAX_JSON_DEPTH));
  try {
    return JSON.parse(line);
  } catch (err) {
    throw new TaskLoadError(ref, null, `not valid JSON (${(err as Error).message})`);
  }
}

/** Elements of a JSON array file with their 0-based indexes. */
export function jsonArrayRows(file: string, text: string): { ref: RowRef; row: unknown }[] {
  requireContent(file, text);
  // The array itself is one level, so its rows get the same depth as JSONL rows.
  const deep = tooDeepAt(text, MAX_JSON_DEPTH + 1);
  if (deep >= 0) {
    const line = text.slice(0, deep).split("\n").length;
    throw new TaskLoadError(null, null, `line ${line}: a row is ${tooDeep(MAX_JSON_DEPTH)}`, file);
  }
  let data: unknown;
  try {
    data = JSON.parse(text);
  } catch (err) {
    throw new TaskLoadError(null, null, `not valid JSON (${(err as Error).message})`, file);
  }
  if (!Array.isArray(data)) throw new TaskLoadError(null, null, "expected a JSON array of rows", file);
  if (data.length === 0) throw new TaskLoadError(null, null, "the JSON array is empty, no rows", file);
  return data.map((row, n) => ({ ref: { file, unit: "row", n }, row }));
}
