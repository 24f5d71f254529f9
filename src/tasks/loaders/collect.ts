import { Task } from "../task.js";
import { describeRow, parseRow, type RowRef, TaskLoadError } from "./load-error.js";

export interface SkippedRow {
  /** e.g. "math500.parquet row 12" */
  where: string;
  field: string | null;
  reason: string;
}

export interface CollectOptions {
  /** Continue past bad rows, recording why each was skipped, instead of throwing on the first. */
  skipBad?: boolean;
  /** Stop after this many tasks. */
  limit?: number;
}

/**
 * Turns raw rows into Tasks through `toTask`, validating each result against the Task schema.
 * Bad rows throw their TaskLoadError, or with `skipBad` are counted with their reason.
 */
export function collectTasks<R>(
  rows: Iterable<{ ref: RowRef; row: R }>,
  toTask: (row: R, ref: RowRef) => Task,
  opts: CollectOptions,
): { tasks: Task[]; skipped: SkippedRow[] } {
  const tasks: Task[] = [];
  const skipped: SkippedRow[] = [];
  const limit = opts.limit ?? Number.POSITIVE_INFINITY;
  for (const { ref, row } of rows) {
    if (tasks.length >= limit) break;
    try {
      tasks.push(parseRow(Task, toTask(row, ref), ref));
    } catch (err) {
      if (!(err instanceof TaskLoadError) || !opts.skipBad) throw err;
      skipped.push({ where: describeRow(ref), field: err.field, reason: err.reason });
    }
  }
  return { tasks, skipped };
}
