import type { ModelClient } from "../model/index.js";
import type {
  DialectName,
  FinishReason,
  FormatError,
  ProfileName,
  Step,
  ToolTag,
  TrajectoryOrigin,
} from "../protocol/index.js";
import type { Observation, Tool } from "../tools/index.js";
import type { RunTrajectory } from "./meta.js";

export { type Budget, DEFAULT_BUDGET, DEFAULT_SAMPLING, type Sampling } from "./defaults/index.js";

import type { Budget, Sampling } from "./defaults/index.js";

export interface RunOptions {
  model: ModelClient;
  // biome-ignore lint/suspicious/noExplicitAny: each tool has its own argument type
  tools: ReadonlyMap<ToolTag, Tool<any>>;
  profile: ProfileName;
  /** Whose protocol rules the model was trained on (default `coa`): parsing, rules and the answer follow it. */
  dialect?: DialectName;
  /**
   * The exact system prompt the model was trained with (`--system-prompt-file`), instead of ours.
   * With a model whose server applies its chat template (`ModelClient.chatPrompt`), the prompt is
   * rendered there from the dialect's messages; otherwise it is `renderPrompt`'s plain text.
   */
  systemPrompt?: string;
  question: string;
  taskId?: string;
  budget?: Partial<Budget>;
  sampling?: Partial<Sampling>;
  /** Limit for one tool call (capped by the time left in the episode). */
  toolTimeoutMs?: number;
  /** Observation text beyond this is cut by the tool, with a marker. */
  maxObservationChars?: number;
  /** Recorded as Trajectory.origin; default "run". */
  origin?: TrajectoryOrigin;
  onEvent?: (event: RunEvent) => void;
  /** Cancels the episode: runAgent then rejects with the signal's reason. */
  signal?: AbortSignal;
  /**
   * `performance.now()` when the episode's clock started, if before runAgent was called (coa run
   * counts opening the model against `--max-time`); default: the call.
   */
  startedAt?: number;
}

/** Live progress of an episode, in order, for printing and logging. */
export type RunEvent =
  | { type: "model"; turn: number; text: string; tokens: number; ms: number; finishReason: "stop" | "length" }
  /** A step completed: parsed from model text, or an observation the runtime appended. */
  | { type: "step"; turn: number; step: Step }
  | { type: "format_error"; turn: number; errors: FormatError[]; total: number }
  | { type: "tool_start"; turn: number; tool: ToolTag; args: string }
  | { type: "tool_end"; turn: number; tool: ToolTag; observation: Observation; duplicate: boolean }
  | { type: "finish"; finishReason: FinishReason; answer: string | null; trajectory: RunTrajectory };

/** One model call as recorded in Trajectory.meta.runtime.calls: the per-step timing and what followed it. */
export interface CallRecord {
  turn: number;
  modelMs: number;
  modelTokens: number;
  finishReason: "stop" | "length";
  /** What the runtime did after the call: continued a cut-off turn, ran a tool, fed back errors, or ended. */
  action: "continue" | "tool" | "feedback" | "answer";
  tool?: ToolTag;
  toolMs?: number;
  duplicate?: boolean;
  observationTokens?: number;
  /** Tokens past the asked `maxTokens` that the model returned and the runtime dropped. */
  cutTokens?: number;
}
