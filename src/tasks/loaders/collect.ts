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
 * Bad rows, and rows repeating an earlier id, throw their TaskLoadError, or with `skipBad` are
 * counted with their reason.
 */
export function collectTasks<R>(
  rows: Iterable<{ ref: RowRef; row: R }>,
  toTask: (row: R, ref: RowRef) => Task,
  opts: CollectOptions,
): { tasks: Task[]; skipped: SkippedRow[] } {
  const tasks: Task[] = [];
  const skipped: SkippedRow[] = [];
  const limit = opts.limit ?? Number.POSITIVE_INFINITY;
  // Ids key traces and results downstream (teach, eval): a second row with the same id would be
  // run, written, then silently collapsed onto the first.
  const seen = new Map<string, RowRef>();
  for (const { ref, row } of rows) {
    if (tasks.length >= limit) break;
    try {
      const task = parseRow(Task, toTask(row, ref), ref);
      const first = seen.get(task.id);
      if (first) {
        throw new TaskLoadError(
          ref,
          "id",
          `duplicate task id "${task.id}" (already at ${first.unit} ${first.n})`,
        );
      }
      seen.set(task.id, ref);
      tasks.push(task);
    } catch (err) {
      if (!(err instanceof TaskLoadError) || !opts.skipBad) throw err;
      skipped.push({ where: describeRow(ref), field: err.field, reason: err.reason });
    }
  }
  return { tasks, skipped };
}
