/**
 * The library entry (`import { runAgent } from "chain-of-agents"`): run an agent, parse and check
 * what it writes, load tasks, distill traces and measure runs. Every name comes from a folder's face.
 * The model, tasks and tools faces are picked from rather than re-exported whole: some of their
 * names (`FinishReason`, `ChatMessage`, `PlanStep`, `CodeArgs`) mean something else in protocol or distill.
 */
export * from "./distill/index.js";
export * from "./eval/index.js";
export {
  type EngineLaunch,
  launchModel,
  type ModelClient,
  type OpenModelOptions,
  openModel,
} from "./model/index.js";
export * from "./protocol/index.js";
export * from "./runtime/index.js";
export {
  FieldMap,
  type LoadedTasks,
  type LoadTasksOptions,
  loadTasks,
  parseFieldMap,
  Task,
  type TaskFileFormat,
  TaskKind,
  TaskLoadError,
} from "./tasks/index.js";
export {
  createToolset,
  type Observation,
  type Tool,
  ToolArgsError,
  type ToolContext,
  ToolsetConfig,
} from "./tools/index.js";
