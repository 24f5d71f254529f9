import { ByteTokenizer } from "../model/index.js";
import {
  renderObservation,
  renderPrompt,
  renderSteps,
  type Step,
  type Trajectory,
} from "../protocol/index.js";
import type { MasTrace } from "../teacher/index.js";

const tokenizer = new ByteTokenizer();

/** A small token-exact trajectory: model turns split at each tool call, observations as tool segments. */
export function sampleTrajectory(
  question: string,
  turns: { steps: Step[]; observation?: string }[],
): Trajectory {
  const segments: Trajectory["segments"] = [];
  for (const turn of turns) {
    segments.push({ source: "model", ids: tokenizer.encode(renderSteps(turn.steps)) });
    if (turn.observation !== undefined)
      segments.push({ source: "tool", ids: tokenizer.encode(renderObservation(turn.observation)) });
  }
  const last = turns.at(-1)?.steps.at(-1);
  const count = (source: "model" | "tool") =>
    segments.filter((s) => s.source === source).reduce((n, s) => n + s.ids.length, 0);
  const promptIds = tokenizer.encode(renderPrompt({ profile: "all", question }));
  return {
    version: 2,
    id: `t-${question.length}`,
    question,
    profile: "all",
    model: "scripted",
    tokenizer: tokenizer.name,
    promptIds,
    segments,
    answer: last?.type === "answer" ? last.text : null,
    finishReason: "answer",
    reward: 1,
    origin: "eval",
    meta: {
      runtime: {
        budget: { maxTurns: 24, maxTokens: 16_384, maxTimeMs: 600_000, maxFormatErrors: 3 },
        sampling: { temperature: 1, topP: 1, maxTokensPerTurn: 1024 },
        calls: turns.map((t, i) => ({
          turn: i + 1,
          modelMs: 1,
          modelTokens: segments.filter((s) => s.source === "model")[i]!.ids.length,
          finishReason: "stop",
          action: t.observation === undefined ? "answer" : "tool",
        })),
        formatErrors: [],
      },
      eval: { sample: 0, correct: true, error: null, scorer: "exact", selfScore: null, answers: ["1947"] },
    },
    stats: {
      turns: turns.length,
      toolCalls: { wiki_search: turns.filter((t) => t.observation !== undefined).length },
      duplicateCalls: 0,
      formatErrors: 0,
      promptTokens: promptIds.length,
      modelTokens: count("model"),
      toolTokens: count("tool"),
      contextTokens: promptIds.length,
      modelCalls: turns.length,
      wallMs: 5,
      modelMs: 3,
      toolMs: 2,
    },
  };
}

export const sampleMasTrace: MasTrace = {
  version: 1,
  taskId: "w-1",
  question: "Who founded the company that employs Ada Brand?",
  answers: ["Lio Tamsin"],
  taskKind: "multihop",
  source: "world",
  driver: "expert",
  model: "expert",
  tokenizer: "coa-byte-v1",
  finalAnswer: "Lio Tamsin",
  reward: 1,
  error: null,
  stats: {
    agentCalls: 3,
    toolCalls: 1,
    replans: 0,
    reflections: 0,
    tokensIn: 300,
    tokensOut: 60,
    tokensCached: 0,
    wallMs: 12,
  },
  messages: [
    {
      index: 0,
      from: "user",
      to: "manager",
      kind: "task",
      content: "Who founded…",
      tokensIn: 0,
      tokensOut: 0,
      tokensCached: 0,
      ms: 0,
    },
    {
      index: 1,
      from: "manager",
      to: "searcher",
      kind: "delegate",
      content: "Find Ada Brand's employer.",
      tokensIn: 120,
      tokensOut: 20,
      tokensCached: 0,
      ms: 1,
    },
    {
      index: 2,
      from: "searcher",
      to: "tool",
      kind: "tool_call",
      content: "",
      tool: { name: "wiki_search", args: "Ada Brand employer" },
      tokensIn: 80,
      tokensOut: 10,
      tokensCached: 0,
      ms: 1,
    },
    {
      index: 3,
      from: "tool",
      to: "searcher",
      kind: "observation",
      content: "1. Ada Brand\n   works at Corvel Ltd.",
      ok: true,
      tokensIn: 0,
      tokensOut: 0,
      tokensCached: 0,
      ms: 2,
    },
    {
      index: 4,
      from: "manager",
      to: "user",
      kind: "final",
      content: "Lio Tamsin",
      tokensIn: 100,
      tokensOut: 30,
      tokensCached: 0,
      ms: 1,
    },
  ],
};
