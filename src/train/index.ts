export { type EngineRestartOptions, type RestartableEngine, withEngineRestarts } from "./engine-restarts.js";
export { PretrainConfig, type PretrainConfigInput } from "./pretrain/config.js";
export { type CorpusSpec, type PretrainCorpus, pretrainCorpus } from "./pretrain/corpus.js";
export { type PretrainData, type PretrainText, pretrainText } from "./pretrain/data.js";
export { DOC_KINDS, DocKind, docText, type PretrainDoc, worldDocuments } from "./pretrain/drills.js";
export type { Fertility } from "./pretrain/fertility.js";
export { applyMix, Mix, parseMix } from "./pretrain/mix.js";
export { pretrainTokenizer } from "./pretrain/tokenizer.js";
export { type PretrainRunOptions, type PretrainSummary, runPretrain } from "./pretrain/trainer.js";
export { type CurveSpec, writeCurvesReport } from "./report.js";
export { groupAdvantages, isInformative, overlongPenalty } from "./rl/advantages.js";
export { miniBatches, policySequence } from "./rl/batch.js";
export { RewardConfig, RlConfig, type RlConfigInput, RolloutConfig, UpdateConfig } from "./rl/config.js";
export { agentEpisodes } from "./rl/episode.js";
export {
  type Detokenize,
  type Group,
  groupRewards,
  type RunEpisode,
  rolloutGroups,
  type ScoreAnswer,
  type ScoredSample,
  scoreSample,
} from "./rl/rollout.js";
export {
  drawTasks,
  type RlDeps,
  type RlRunOptions,
  RlState,
  RlStepMetrics,
  type RlSummary,
  runRl,
} from "./rl/trainer.js";
export { Checkpoints, LAST_LINK, METRICS_FILE, MetricsLog, STATE_FILE } from "./run-folder.js";
export { LrSchedule, lrAt } from "./schedule.js";
export { epochBatches, packInOrder, splitHoldout } from "./sft/batches.js";
export { SftConfig, type SftConfigInput } from "./sft/config.js";
export {
  type BadLine,
  dataTokenizerFile,
  fitLength,
  loadSftData,
  resolveTrajectoryFile,
  type SftExample,
  toSftExample,
} from "./sft/data.js";
export { runSft, type SftRunOptions, SftState, type SftStepMetrics, type SftSummary } from "./sft/trainer.js";
export {
  type BatchSource,
  heldOutLoss,
  runStepLoop,
  type StepLoopOptions,
  type StepMetrics,
  type StepProbe,
  StepState,
} from "./step-loop.js";
export type { TrainerClient } from "./trainer-client.js";
