import pLimit, { type LimitFunction } from "p-limit";
import type { ModelClient } from "../model/index.js";
import type { ProfileName } from "../protocol/index.js";
import { type Budget, type RunEvent, type RunOptions, runAgent, type Sampling } from "../runtime/index.js";
import type { ServedTrajectory, TrajectoryStore } from "./trajectory-store.js";

/** The agent a server runs for every request: one model, one toolset, defaults from the command line. */
export interface AgentConfig {
  model: ModelClient;
  tools: RunOptions["tools"];
  profile: ProfileName;
  budget?: Partial<Budget>;
  sampling?: Partial<Sampling>;
  toolTimeoutMs?: number;
  /** Episodes running at once; more requests wait their turn. */
  concurrency: number;
  store: TrajectoryStore;
  /** The protocol dialect the model speaks and the system prompt it was trained with (`--dialect`). */
  prompt?: Pick<RunOptions, "dialect" | "systemPrompt">;
}

/** What one request sets for its episode; undefined keeps the server's default. */
export interface EpisodeRequest {
  responseId: string;
  question: string;
  maxTokens?: number;
  temperature?: number;
  topP?: number;
  seed?: number;
  /** The client's connection: a disconnect aborts the episode, queued or running. */
  signal: AbortSignal;
  onEvent?: (event: RunEvent) => void;
}

/**
 * Runs served episodes, at most `concurrency` at once, and logs each finished one. An aborted
 * episode rejects and is not logged: the log holds whole episodes only.
 */
export class AgentRunner {
  private readonly limit: LimitFunction;

  constructor(private readonly config: AgentConfig) {
    this.limit = pLimit(config.concurrency);
  }

  get modelName(): string {
    return this.config.model.name;
  }

  get store(): TrajectoryStore {
    return this.config.store;
  }

  run(req: EpisodeRequest): Promise<ServedTrajectory> {
    return this.limit(async () => {
      // The client may have left while the request waited in the queue.
      req.signal.throwIfAborted();
      const { config } = this;
      const trajectory = await runAgent({
        model: config.model,
        tools: config.tools,
        profile: config.profile,
        ...config.prompt,
        question: req.question,
        budget: { ...config.budget, ...defined({ maxTokens: req.maxTokens }) },
        sampling: {
          ...config.sampling,
          ...defined({ temperature: req.temperature, topP: req.topP, seed: req.seed }),
        },
        toolTimeoutMs: config.toolTimeoutMs,
        origin: "serve",
        signal: req.signal,
        onEvent: req.onEvent,
      });
      return config.store.add(req.responseId, trajectory);
    });
  }
}

/** The given fields without the undefined ones, so they do not hide the server's defaults. */
function defined<T extends object>(fields: T): Partial<T> {
  return Object.fromEntries(Object.entries(fields).filter(([, v]) => v !== undefined)) as Partial<T>;
}
