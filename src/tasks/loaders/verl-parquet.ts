import { readFile } from "node:fs/promises";
import { parquetReadObjects } from "hyparquet";
import { z } from "zod";
import { CodeTest, type Task, TaskKind } from "../task.js";
import { type CollectOptions, collectTasks, type SkippedRow } from "./collect.js";
import { parseRow, type RowRef, TaskLoadError } from "./load-error.js";

const ChatMessage = z.object({ role: z.string(), content: z.string() });

/** One row of a verl RL parquet (the layout verl's data preprocessors write). */
export const VerlRow = z.object({
  data_source: z.string(),
  prompt: z.array(ChatMessage).min(1),
  ability: z.string().nullish(),
  reward_model: z.object({
    style: z.string().nullish(),
    ground_truth: z.union([z.string(), z.number(), z.array(z.string())]),
  }),
  extra_info: z.record(z.string(), z.unknown()).nullish(),
});
export type VerlRow = z.infer<typeof VerlRow>;

/** LiveCodeBench-style ground truth, a JSON string: stdin/expected_output pairs, or a LeetCode assert snippet. */
const CodeGroundTruth = z.union([
  z.object({
    stdin: z.array(z.string()),
    expected_output: z.array(z.string()),
    question_id: z.string().optional(),
  }),
  z.object({ functional: z.string(), question_id: z.string().optional() }),
]);

const TASK_MARKER = "\nTask:";
const ANSWER_FORMAT_MARKER = "\nAnswer format:";

/**
 * The problem statement inside a verl chat prompt. AFM-style prompts put tool instructions first and the
 * problem after a "Task:" line, and code prompts end with an answer-format note that our protocol replaces.
 */
export function questionFromPrompt(messages: { role: string; content: string }[]): string {
  const user = messages.findLast((m) => m.role === "user") ?? messages[messages.length - 1]!;
  let text = user.content.replaceAll("\r\n", "\n");
  const start = text.indexOf(TASK_MARKER);
  if (start >= 0) text = text.slice(start + TASK_MARKER.length);
  const end = text.lastIndexOf(ANSWER_FORMAT_MARKER);
  if (end >= 0) text = text.slice(0, end);
  return text.trim();
}

/** Short, stable source names: "MATH500" → "math500", "skywork_livecodebench_v5" → "livecodebench". */
export function sourceName(dataSource: string): string {
  const lower = dataSource.toLowerCase();
  return lower.includes("livecodebench") ? "livecodebench" : lower;
}

function kindOf(row: VerlRow, codeTruth: boolean): TaskKind {
  const named = TaskKind.safeParse(row.ability);
  if (named.success) return named.data;
  if (codeTruth || row.ability === "coding" || row.ability === "code") return "code";
  if (/math|aime|amc|gsm/i.test(`${row.ability ?? ""} ${row.data_source}`)) return "math";
  if (/web/i.test(row.ability ?? "")) return "web_qa";
  return "qa";
}

/** hyparquet returns INT64 as bigint, which JSON cannot hold. */
function jsonSafe(value: unknown): unknown {
  if (typeof value === "bigint") return Number(value);
  if (Array.isArray(value)) return value.map(jsonSafe);
  if (value && typeof value === "object") {
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, jsonSafe(v)]));
  }
  return value;
}

function parseCodeTruth(text: string, ref: RowRef): z.infer<typeof CodeGroundTruth> {
  let data: unknown;
  try {
    data = JSON.parse(text);
  } catch (err) {
    throw new TaskLoadError(ref, "reward_model.ground_truth", `not valid JSON (${(err as Error).message})`);
  }
  const truth = parseRow(CodeGroundTruth, data, ref, "reward_model.ground_truth");
  if ("stdin" in truth && truth.stdin.length !== truth.expected_output.length) {
    throw new TaskLoadError(
      ref,
      "reward_model.ground_truth",
      `${truth.stdin.length} stdin cases but ${truth.expected_output.length} expected outputs`,
    );
  }
  return truth;
}

function looksLikeCodeTruth(truth: unknown): truth is string {
  return typeof truth === "string" && /^\s*\{\s*"(stdin|functional)"/.test(truth);
}

function stringList(value: unknown): string[] | null {
  return Array.isArray(value) && value.every((v) => typeof v === "string") ? value : null;
}

/**
 * Maps one verl row to a Task. Rows written by our own verl exporter carry the task itself in
 * `extra_info` (task_id, question, answers) and its kind as `ability`; those win over the prompt.
 * Code rows keep their tests in `meta.tests` (or `meta.functional`).
 */
export function verlRowToTask(raw: unknown, ref: RowRef): Task {
  const row = parseRow(VerlRow, jsonSafe(raw), ref);
  const extra = row.extra_info ?? {};
  const truth = row.reward_model.ground_truth;
  const kind = kindOf(row, looksLikeCodeTruth(truth));
  const source = sourceName(row.data_source);
  const meta: Record<string, unknown> = {
    dataSource: row.data_source,
    ability: row.ability ?? null,
    rowIndex: ref.n,
    ...extra,
  };
  for (const key of ["tools_kwargs", "need_tools_kwargs", "task_id", "question", "answers"]) delete meta[key];
  let answers: string[];
  if (kind === "code") {
    if (typeof truth !== "string") {
      throw new TaskLoadError(ref, "reward_model.ground_truth", "code tests must be a JSON string");
    }
    const tests = parseCodeTruth(truth, ref);
    if ("stdin" in tests) {
      meta.tests = tests.stdin.map((input, i) => CodeTest.parse({ input, output: tests.expected_output[i] }));
    } else {
      meta.tests = [];
      meta.functional = tests.functional;
    }
    answers = [];
  } else {
    answers = stringList(extra.answers) ?? (Array.isArray(truth) ? truth : [String(truth)]);
  }
  const question =
    typeof extra.question === "string" && extra.question ? extra.question : questionFromPrompt(row.prompt);
  if (!question) throw new TaskLoadError(ref, "prompt", "no question text in the prompt");
  const id =
    typeof extra.task_id === "string" && extra.task_id
      ? extra.task_id
      : `${source}-${String(extra.index ?? ref.n)}`;
  return { id, question, answers, kind, source, meta };
}

export async function loadVerlParquet(
  path: string,
  opts: CollectOptions = {},
): Promise<{ tasks: Task[]; skipped: SkippedRow[] }> {
  const file = path;
  const buf = await readFile(path);
  let rows: Record<string, unknown>[];
  try {
    const arrayBuffer = buf.buffer.slice(buf.byteOffset, buf.byteOffset + buf.byteLength);
    rows = await parquetReadObjects({ file: arrayBuffer });
  } catch (err) {
    throw new TaskLoadError(null, null, `not a readable parquet file (${(err as Error).message})`, file);
  }
  const refs = rows.map((row, n) => ({ ref: { file, unit: "row" as const, n }, row }));
  return collectTasks(refs, verlRowToTask, opts);
}
