import { readdir, stat } from "node:fs/promises";
import path from "node:path";
import type { z } from "zod";
import { type ImportDropReason, MasTrace } from "../teacher/index.js";
import { jsonlLines } from "../util/index.js";

/** Where a trace came from: file and 1-based line. */
export interface TraceRef {
  file: string;
  line: number;
}

export const refText = (ref: TraceRef): string => `${ref.file}:${ref.line}`;

export type ReadFailure = "invalid_json" | "unknown_agent" | "schema_error" | ImportDropReason;

export type TraceLine =
  | { ok: true; ref: TraceRef; trace: MasTrace }
  | { ok: false; ref: TraceRef; reason: ReadFailure; detail: string; taskId?: string };

/** Trace files: the file itself, or the `*trace*.jsonl` files of a folder (sorted, not recursive). */
export async function findTraceFiles(input: string): Promise<string[]> {
  const info = await stat(input).catch(() => null);
  if (!info) throw new Error(`${input}: no such file or folder`);
  if (info.isFile()) return [input];
  const names = (await readdir(input)).filter((n) => n.endsWith(".jsonl") && n.includes("trace")).sort();
  if (!names.length) throw new Error(`${input}: no trace files (*trace*.jsonl) in this folder`);
  return names.map((n) => path.join(input, n));
}

/** Parses one line; never throws. A truncated last line reads as invalid JSON. */
export function parseTraceLine(text: string, ref: TraceRef): TraceLine {
  let data: unknown;
  try {
    data = JSON.parse(text);
  } catch (err) {
    return {
      ok: false,
      ref,
      reason: "invalid_json",
      detail: `not JSON, truncated? (${(err as Error).message})`,
    };
  }
  const parsed = MasTrace.safeParse(data);
  if (parsed.success) {
    const unusable = parsed.data.unusable;
    if (unusable)
      return { ok: false, ref, reason: unusable.reason, detail: unusable.detail, taskId: parsed.data.taskId };
    return { ok: true, ref, trace: parsed.data };
  }
  const issue = parsed.error.issues[0]!;
  const taskId = (data as { taskId?: unknown } | null)?.taskId;
  return {
    ok: false,
    ref,
    reason: isAgentIssue(issue) ? "unknown_agent" : "schema_error",
    detail: `${fieldPath(issue.path)}: ${issue.message}`,
    ...(typeof taskId === "string" ? { taskId } : {}),
  };
}

function isAgentIssue(issue: z.core.$ZodIssue): boolean {
  const last = issue.path.at(-1);
  return issue.path[0] === "messages" && (last === "from" || last === "to") && issue.code === "invalid_value";
}

/** `messages[3].from`, as a reader would write the field. */
function fieldPath(p: readonly PropertyKey[]): string {
  return (
    p.reduce<string>(
      (acc, k) => (typeof k === "number" ? `${acc}[${k}]` : acc ? `${acc}.${String(k)}` : String(k)),
      "",
    ) || "(root)"
  );
}

/** Every non-blank line of the files, in order, as a parsed trace or a reason it is unusable. */
export async function* readTraceLines(files: readonly string[]): AsyncGenerator<TraceLine> {
  for (const file of files) {
    for await (const { line, text } of jsonlLines(file)) yield parseTraceLine(text, { file, line });
  }
}
