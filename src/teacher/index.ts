export type { AgentCall, AgentReply, Driver, DriverEpisode, Purpose } from "./agents.js";
export { renderContext, renderMessage } from "./context.js";
export { DEFAULT_EPISODE, type EpisodeOptions, runEpisode, type Toolbox } from "./episode.js";
export { EXPERT_RATES, ExpertDriver, type ExpertOptions } from "./expert/expert.js";
export { arithmeticCode } from "./expert/python.js";
export { LlmDriver, type LlmDriverOptions } from "./llm/llm-driver.js";
export { ROLE_PROMPTS, type Role } from "./prompts.js";
export {
  formatSummary,
  type KindSummary,
  summarizeTraces,
  type TeachSummary,
  teachReport,
} from "./summary.js";
export { runTeach, type TeachOptions, type TeachProgress, type TeachResult } from "./teach.js";
export * from "./trace.js";
