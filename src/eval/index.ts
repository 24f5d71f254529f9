export { scoreDialectAnswer } from "./answer-score.js";
export {
  type CopyAccuracy,
  type CopyEpisode,
  type CopyRate,
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
  type CostSummary,
  costSummary,
  type EpisodeCost,
  passAtK,
  reduction,
  type ScoredSample,
  type SuccessMetrics,
  successByKind,
  successMetrics,
  type TaskSamples,
  taskScores,
} from "./metrics.js";
export { type PairedDifference, pairedDifference, tCritical } from "./paired.js";
export { type Report, type ReportBlock, type ReportSection, reportHtml, reportMarkdown } from "./report.js";
export {
  EVAL_TRAJECTORIES_FILE,
  type EvalOptions,
  type EvalSummary,
  EvalTrajectory,
  evaluate,
  SampleVerdict,
} from "./run.js";
