export { scoreDialectAnswer } from "./answer-score.js";
export {
  CopyAccuracy,
  type CopyEpisode,
  CopyRate,
  type CopyTargets,
  copyAccuracy,
  copyTargets,
} from "./copy.js";
export {
  type CostComparison,
  type CostSystem,
  compareCosts,
  costComparisonReport,
} from "./cost-compare.js";
export { masTraceCost, trajectoryCost, trajectoryCostIn } from "./costs.js";
export {
  CostSummary,
  costSummary,
  type EpisodeCost,
  passAtK,
  reduction,
  type ScoredSample,
  SuccessMetrics,
  successByKind,
  successMetrics,
  type TaskSamples,
  taskScores,
} from "./metrics.js";
export { type PairedDifference, pairedDifference, tCritical } from "./paired.js";
export { type Report, type ReportBlock, type ReportSection, reportHtml, reportMarkdown } from "./report.js";
export {
  EVAL_SUMMARY_FILE,
  EVAL_TRAJECTORIES_FILE,
  type EvalOptions,
  EvalSummary,
  EvalSummaryFile,
  EvalTrajectory,
  evaluate,
  SampleVerdict,
} from "./run.js";
