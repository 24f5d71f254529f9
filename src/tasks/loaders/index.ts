export type { CollectOptions, SkippedRow } from "./collect.js";
export { FieldMap, parseFieldMap } from "./field-map.js";
export { describeRow, type RowRef, TaskLoadError } from "./load-error.js";
export { type LoadedTasks, type LoadTasksOptions, loadTasks, type TaskFileFormat } from "./load-tasks.js";
export { printable } from "./printable.js";
export { questionFromPrompt, sourceName, VerlRow, verlRowToTask } from "./verl-parquet.js";
