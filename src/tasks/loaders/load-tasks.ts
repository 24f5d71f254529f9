import type { Stats } from "node:fs";
import { readdir, readFile, stat } from "node:fs/promises";
import { basename, extname, join } from "node:path";
import { Task, type TaskKind } from "../task.js";
import { WORLD_MANIFEST_FILE } from "../world/generate.js";
import { type CollectOptions, collectTasks, type SkippedRow } from "./collect.js";
import { type FieldMap, mappedRowToTask, parseFieldMap } from "./field-map.js";
import { jsonArrayRows, jsonlLines, parseJsonLine, requireContent } from "./json-rows.js";
import { notAnObject, parseRow, type RowRef, TaskLoadError } from "./load-error.js";
import { loadVerlParquet } from "./verl-parquet.js";

export type TaskFileFormat =
  | "verl-parquet"
  | "task-jsonl"
  | "qa-jsonl"
  | "mapped-jsonl"
  | "mapped-json"
  | "webwalker-json"
  | "world";

export interface LoadTasksOptions extends CollectOptions {
  /** For a world directory: which tasks/<split>.jsonl to read. */
  split?: string;
  /** Field mapping for generic JSONL/JSON rows, as an object or the CLI form "question=q,answers=golds". */
  map?: FieldMap | string;
  /** Kind given to mapped rows (default "qa"). */
  kind?: TaskKind;
  /** Source given to mapped rows (default: the row's data_source, else the file name). */
  source?: string;
}

export interface LoadedTasks {
  file: string;
  format: TaskFileFormat;
  tasks: Task[];
  skipped: SkippedRow[];
}

/** The NQ-style QA layout ({question, answer: string[], data_source}) needs no --map. */
const QA_MAP: FieldMap = { question: "question", answers: "answer", source: "data_source" };
const QA_ANSWERS_MAP: FieldMap = { question: "question", answers: "answers", source: "data_source" };

function isObject(v: unknown): v is Record<string, unknown> {
  return v !== null && typeof v === "object" && !Array.isArray(v);
}

function isTaskRecord(row: unknown): boolean {
  return isObject(row) && "id" in row && "question" in row && "answers" in row && "kind" in row;
}

function fileStem(path: string): string {
  return basename(path, extname(path));
}

function resolveMap(map: FieldMap | string | undefined): FieldMap | undefined {
  return typeof map === "string" ? parseFieldMap(map) : map;
}

/** A QA preset for rows that carry question + answer(s), or undefined when the row needs an explicit map. */
function qaPreset(row: unknown): FieldMap | undefined {
  if (!isObject(row) || !("question" in row)) return undefined;
  if ("answer" in row) return QA_MAP;
  if ("answers" in row) return QA_ANSWERS_MAP;
  return undefined;
}

async function loadWorldDir(dir: string, opts: LoadTasksOptions): Promise<LoadedTasks> {
  const tasksDir = join(dir, "tasks");
  const splits = (await readdir(tasksDir).catch(() => []))
    .filter((f) => f.endsWith(".jsonl"))
    .map((f) => f.slice(0, -".jsonl".length))
    .sort();
  if (!opts.split) {
    throw new TaskLoadError(
      null,
      null,
      `world dir: choose a split (${splits.join(", ") || "none found"})`,
      dir,
    );
  }
  if (!splits.includes(opts.split)) {
    throw new TaskLoadError(
      null,
      null,
      `no split "${opts.split}" (found: ${splits.join(", ") || "none"})`,
      dir,
    );
  }
  const loaded = await loadJsonl(join(tasksDir, `${opts.split}.jsonl`), opts);
  return { ...loaded, format: "world" };
}

/** A row whose JSON is parsed only when it is mapped, so one bad line fails (or is skipped) on its own. */
type LazyRow = { ref: RowRef; row: () => unknown };

/**
 * The first row that parses to a JSON object decides the layout. When none does, the file fails on
 * its first row's own fault (not JSON, or not an object) rather than on a layout it cannot have.
 */
function layoutRow(rows: LazyRow[]): unknown {
  let firstError: unknown = null;
  for (const { ref, row } of rows) {
    try {
      const value = row();
      if (isObject(value)) return value;
      firstError ??= new TaskLoadError(ref, null, notAnObject(value));
    } catch (err) {
      firstError ??= err;
    }
  }
  if (firstError) throw firstError;
  return undefined;
}

function loadObjectRows(path: string, rows: LazyRow[], container: "jsonl" | "json", opts: LoadTasksOptions) {
  const map = resolveMap(opts.map);
  // With a map every row is checked on its own (and may be skipped); only detection needs a good row.
  const first = map ? undefined : layoutRow(rows);
  const load = (toTask: (row: unknown, ref: RowRef) => Task) =>
    collectTasks(rows, (row, ref) => toTask(row(), ref), opts);
  if (!map && isTaskRecord(first)) {
    return { file: path, format: "task-jsonl" as const, ...load((row, ref) => parseRow(Task, row, ref)) };
  }
  // WebWalkerQA rows: {question, answer, root_url, info{…}}; the website to start from stays in meta.
  const webwalker = !map && container === "json" && isObject(first) && "root_url" in first;
  const rowMap = map ?? qaPreset(first);
  if (!rowMap) {
    const hint = "cannot tell the row layout; pass a field map such as --map question=q,answers=golds";
    throw new TaskLoadError(null, null, hint, path);
  }
  const mapped = {
    map: rowMap,
    kind: opts.kind ?? (webwalker ? "web_qa" : "qa"),
    source: opts.source ?? (webwalker ? "webwalker" : undefined),
    fallbackSource: fileStem(path),
  };
  const preset = container === "jsonl" ? "qa-jsonl" : "mapped-json";
  const format: TaskFileFormat = webwalker ? "webwalker-json" : map ? `mapped-${container}` : preset;
  return { file: path, format, ...load((row, ref) => mappedRowToTask(row, ref, mapped)) };
}

async function loadJsonl(path: string, opts: LoadTasksOptions): Promise<LoadedTasks> {
  const text = await readFile(path, "utf8");
  requireContent(path, text);
  const lines = [...jsonlLines(path, text)];
  const rows = lines.map(({ ref, row }) => ({ ref, row: () => parseJsonLine(row, ref) }));
  return loadObjectRows(path, rows, "jsonl", opts);
}

async function loadJsonArray(path: string, opts: LoadTasksOptions): Promise<LoadedTasks> {
  const rows = jsonArrayRows(path, await readFile(path, "utf8")).map(({ ref, row }) => ({
    ref,
    row: () => row,
  }));
  return loadObjectRows(path, rows, "json", opts);
}

function nodeKind(info: Stats): string {
  if (info.isFIFO()) return "a FIFO";
  if (info.isSocket()) return "a socket";
  if (info.isCharacterDevice() || info.isBlockDevice()) return "a device";
  return "a special file";
}

async function sniff(path: string): Promise<"parquet" | "json" | "jsonl"> {
  const ext = extname(path).toLowerCase();
  if (ext === ".parquet") return "parquet";
  if (ext === ".jsonl" || ext === ".ndjson") return "jsonl";
  const head = (await readFile(path)).subarray(0, 4096);
  if (head.subarray(0, 4).toString("latin1") === "PAR1") return "parquet";
  if (ext === ".json" || head.toString("utf8").trimStart().startsWith("[")) return "json";
  return "jsonl";
}

/**
 * Loads tasks from a benchmark file or a generated world directory, detecting the format by
 * extension and content: verl parquet, Task JSONL, QA JSONL (NQ layout), WebWalkerQA JSON, or any
 * JSONL/JSON array through a field map.
 */
export async function loadTasks(path: string, opts: LoadTasksOptions = {}): Promise<LoadedTasks> {
  const info = await stat(path).catch(() => null);
  if (!info) throw new TaskLoadError(null, null, "no such file or directory", path);
  // A FIFO or device would block or never end on read: only plain files and world dirs are opened.
  if (!info.isFile() && !info.isDirectory()) {
    throw new TaskLoadError(null, null, `not a regular file (${nodeKind(info)})`, path);
  }
  if (info.isDirectory()) {
    const isWorld = await stat(join(path, WORLD_MANIFEST_FILE)).catch(() => null);
    if (!isWorld) throw new TaskLoadError(null, null, "a directory must be a world (no world.json)", path);
    return loadWorldDir(path, opts);
  }
  const kind = await sniff(path);
  if (kind === "parquet")
    return { file: path, format: "verl-parquet", ...(await loadVerlParquet(path, opts)) };
  if (kind === "json") return loadJsonArray(path, opts);
  return loadJsonl(path, opts);
}
