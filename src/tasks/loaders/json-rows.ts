import { type RowRef, TaskLoadError } from "./load-error.js";

/** Non-blank lines of a JSONL text with their 1-based line numbers; each is parsed only when used. */
export function* jsonlLines(file: string, text: string): Generator<{ ref: RowRef; row: string }> {
  const lines = text.split("\n");
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i]!.trim();
    if (line) yield { ref: { file, unit: "line", n: i + 1 }, row: line };
  }
}

export function parseJsonLine(line: string, ref: RowRef): unknown {
  try {
    return JSON.parse(line);
  } catch (err) {
    throw new TaskLoadError(ref, null, `not valid JSON (${(err as Error).message})`);
  }
}

/** Elements of a JSON array file with their 0-based indexes. */
export function jsonArrayRows(file: string, text: string): { ref: RowRef; row: unknown }[] {
  let data: unknown;
  try {
    data = JSON.parse(text);
  } catch (err) {
    throw new TaskLoadError(null, null, `not valid JSON (${(err as Error).message})`, file);
  }
  if (!Array.isArray(data)) throw new TaskLoadError(null, null, "expected a JSON array of rows", file);
  return data.map((row, n) => ({ ref: { file, unit: "row", n }, row }));
}
