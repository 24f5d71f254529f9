export { CallInput, GenericStep, GenericTrace } from "./generic.js";
export { type ImportIssue, type IssueReason, issueText } from "./issues.js";
export { parseOpenAiAgents } from "./openai-agents.js";
export { parseOtlp } from "./otel.js";
export { JsonlTraceProcessor } from "./processor.js";
export { renderCall } from "./render.js";
export { loadRoleTable, RoleTable, resolveAgent, resolveTool, TeamRole } from "./roles.js";
export {
  IMPORT_FORMATS,
  type ImportFormat,
  type ImportOptions,
  type ImportSummary,
  runImport,
} from "./run-import.js";
export { parseRunResult } from "./run-result.js";
export { toMasTrace } from "./to-mas.js";
