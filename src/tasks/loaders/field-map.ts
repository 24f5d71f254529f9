import { z } from "zod";
import type { Task, TaskKind } from "../task.js";
import { notAnObject, type RowRef, TaskLoadError, typeName } from "./load-error.js";

/** Which field of a source row feeds each Task field; values are dotted paths ("meta.golds"). */
export const FieldMap = z.object({
  question: z.string().min(1),
  answers: z.string().min(1),
  id: z.string().min(1).optional(),
  source: z.string().min(1).optional(),
});
export type FieldMap = z.infer<typeof FieldMap>;

const TARGETS = Object.keys(FieldMap.shape);

/** Parses the CLI form `question=q,answers=golds[,id=qid][,source=ds]`. */
export function parseFieldMap(spec: string): FieldMap {
  const entries: Record<string, string> = {};
  for (const part of spec.split(",")) {
    const [target, field, ...rest] = part.split("=").map((s) => s.trim());
    if (!target || !field || rest.length) throw new Error(`--map: "${part}" is not target=field`);
    if (!TARGETS.includes(target)) {
      throw new Error(`--map: unknown target "${target}" (expected one of ${TARGETS.join(", ")})`);
    }
    entries[target] = field;
  }
  const parsed = FieldMap.safeParse(entries);
  if (!parsed.success) {
    const missing = parsed.error.issues.map((i) => i.path.join(".")).join(", ");
    throw new Error(`--map: missing ${missing} (e.g. --map question=q,answers=golds)`);
  }
  return parsed.data;
}

function getPath(row: Record<string, unknown>, path: string): unknown {
  let value: unknown = row;
  for (const key of path.split(".")) {
    if (value === null || typeof value !== "object") return undefined;
    value = (value as Record<string, unknown>)[key];
  }
  return value;
}

function answersFrom(value: unknown, ref: RowRef, field: string): string[] {
  const one = (v: unknown) => typeof v === "string" || typeof v === "number";
  if (one(value)) return [String(value)];
  if (Array.isArray(value) && value.every(one)) return value.map(String);
  throw new TaskLoadError(ref, field, `expected a string or an array of strings, got ${typeName(value)}`);
}

export interface MappedRowOptions {
  map: FieldMap;
  kind: TaskKind;
  /** Task.source; when absent, the row's mapped source field, else `fallbackSource`. */
  source?: string;
  fallbackSource: string;
}

/** Maps one JSON object to a Task through a field map; unmapped fields are kept in `meta`. */
export function mappedRowToTask(row: unknown, ref: RowRef, opts: MappedRowOptions): Task {
  if (row === null || typeof row !== "object" || Array.isArray(row)) {
    throw new TaskLoadError(ref, null, notAnObject(row));
  }
  const obj = row as Record<string, unknown>;
  const { map } = opts;
  const question = getPath(obj, map.question);
  if (typeof question !== "string" || !question.trim()) {
    const got = typeof question === "string" ? "an empty string" : typeName(question);
    throw new TaskLoadError(ref, map.question, `expected a non-empty question string, got ${got}`);
  }
  const answers = answersFrom(getPath(obj, map.answers), ref, map.answers);
  const rowSource = map.source ? getPath(obj, map.source) : undefined;
  const source = opts.source ?? (typeof rowSource === "string" ? rowSource : opts.fallbackSource);
  const rawId = map.id ? getPath(obj, map.id) : undefined;
  if (map.id && (typeof rawId !== "string" || !rawId) && typeof rawId !== "number") {
    throw new TaskLoadError(ref, map.id, `expected an id string or number, got ${typeName(rawId)}`);
  }
  const consumed = new Set(Object.values(map).map((p) => p.split(".")[0]));
  const meta = Object.fromEntries(Object.entries(obj).filter(([k]) => !consumed.has(k)));
  meta[ref.unit] = ref.n;
  const id = rawId !== undefined ? String(rawId) : `${source}-${ref.n}`;
  return { id, question: question.trim(), answers, kind: opts.kind, source, meta };
}
