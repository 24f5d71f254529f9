import type { z } from "zod";
import { printable } from "./printable.js";

/** Where a row sits in its file: JSONL rows are counted by line (1-based), parquet and JSON arrays by index (0-based). */
export interface RowRef {
  file: string;
  unit: "line" | "row";
  n: number;
}

export function describeRow(ref: RowRef): string {
  return `${ref.file} ${ref.unit} ${ref.n}`;
}

/** A row that cannot become a Task; the message names file, row and field. */
export class TaskLoadError extends Error {
  override name = "TaskLoadError";
  constructor(
    readonly row: RowRef | null,
    readonly field: string | null,
    readonly reason: string,
    readonly file: string = row?.file ?? "",
  ) {
    const where = row ? describeRow(row) : file;
    // The message reaches a terminal and quotes file content (JSON errors do): no raw control characters.
    super(printable(field ? `${where}, field "${field}": ${reason}` : `${where}: ${reason}`));
  }
}

/** How a JSON value is named in errors: "null", "array", else its typeof. */
export function typeName(value: unknown): string {
  if (value === undefined) return "nothing (field missing)";
  if (value === null) return "null";
  return Array.isArray(value) ? "array" : typeof value;
}

export const notAnObject = (row: unknown): string => `a row must be a JSON object, got ${typeName(row)}`;

/** For a union that matched no branch, the issue of the branch that got furthest, which names a real field. */
function deepestIssue(issue: z.core.$ZodIssue): { path: PropertyKey[]; message: string } {
  if (issue.code !== "invalid_union" || issue.errors.length === 0) return issue;
  const branches = issue.errors.map((branch) => deepestIssue(branch[0]!));
  const best = branches.reduce((a, b) => (b.path.length > a.path.length ? b : a));
  return { path: [...issue.path, ...best.path], message: best.message };
}

/** Parses `value` with `schema`, turning the first zod issue into a TaskLoadError naming its field path. */
export function parseRow<T>(schema: z.ZodType<T>, value: unknown, ref: RowRef, prefix = ""): T {
  const result = schema.safeParse(value);
  if (result.success) return result.data;
  const issue = deepestIssue(result.error.issues[0]!);
  const path = [prefix, ...issue.path.map(String)].filter(Boolean).join(".");
  throw new TaskLoadError(ref, path || null, issue.message);
}
