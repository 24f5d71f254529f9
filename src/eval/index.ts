export { masTraceCost, trajectoryCost, trajectoryCostIn } from "./costs.js";
export {
  type CostSummary,
  costSummary,
  type EpisodeCost,
  passAtK,
  reduction,
  type ScoredSample,
  type SuccessMetrics,
  successMetrics,
  type TaskSamples,
} from "./metrics.js";
export { type Report, type ReportBlock, type ReportSection, reportHtml, reportMarkdown } from "./report.js";
export { type EvalOptions, type EvalSummary, evaluate, SampleVerdict } from "./run.js";
