export { lastBoxed } from "../protocol/index.js";
export { outputsMatch } from "./code-output.js";
export { codeReward, programOf, type Sandbox } from "./code-reward.js";
export { type FormatRewardOptions, formatReward } from "./format-reward.js";
export {
  type JudgeInput,
  type JudgeOutcome,
  JudgeVerdict,
  judgePrompt,
  LlmJudge,
  type LlmJudgeOptions,
  parseVerdict,
} from "./judge.js";
export { evalLatexNumber } from "./latex-eval.js";
export { normalizeMath } from "./latex-normalize.js";
export { extractMathAnswer, MATH_TOLERANCE, mathEquivalent } from "./math-equivalence.js";
export {
  exactMatch,
  expandGolds,
  hotpotF1,
  normalizeAnswer,
  type QaConvention,
  type QaScores,
  qaScores,
  squadF1,
} from "./qa-metrics.js";
export { exactMatchReward, numericAnswerReward } from "./qa-reward.js";
export { Score } from "./score.js";
export { type ScoreContext, scoreTask } from "./score-task.js";
