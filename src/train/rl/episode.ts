import type { ModelClient } from "../../model/index.js";
import { renderPrompt } from "../../protocol/index.js";
import { runAgent } from "../../runtime/index.js";
import type { Task } from "../../tasks/index.js";
import type { RlConfig } from "./config.js";
import type { RunEpisode } from "./rollout.js";

type Tools = Parameters<typeof runAgent>[0]["tools"];

/**
 * Rollouts through the real runtime: the policy model with the real tool agents, sampling logprobs
 * recorded token by token. The episode's context is capped at prompt + maxResponseTokens.
 */
export function agentEpisodes(opts: {
  model: ModelClient;
  /** The tools, or each task's own (tasks of a world set search their own world's corpus). */
  tools: Tools | ((task: Task) => Tools);
  rollout: RlConfig["rollout"];
  toolTimeoutMs?: number;
}): RunEpisode {
  const { model, tools, rollout } = opts;
  const promptTokens = new Map<string, Promise<number>>();
  const promptLength = (question: string) => {
    let n = promptTokens.get(question);
    if (!n) {
      n = model.tokenize(renderPrompt({ profile: rollout.profile, question })).then((ids) => ids.length);
      promptTokens.set(question, n);
    }
    return n;
  };
  return async (task, { seed, signal }) =>
    runAgent({
      model,
      tools: typeof tools === "function" ? tools(task) : tools,
      profile: rollout.profile,
      question: task.question,
      taskId: task.id,
      origin: "rollout",
      signal,
      toolTimeoutMs: opts.toolTimeoutMs,
      maxObservationChars: rollout.maxObservationChars,
      sampling: {
        temperature: rollout.temperature,
        topP: rollout.topP,
        seed,
        maxTokensPerTurn: rollout.maxTokensPerTurn,
      },
      budget: {
        maxTurns: rollout.maxTurns,
        maxTokens: (await promptLength(task.question)) + rollout.maxResponseTokens,
      },
    });
}
