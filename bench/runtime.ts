// Runtime overhead per step: an episode's wall time minus the time spent in the model (generation
// and tokenization) and in tools, divided by its model calls. A scripted model and an instant tool
// keep those two small, so what is left is parsing, validation, bookkeeping and the record.
// Percentiles are over episodes (each episode's mean per step).
import { z } from "zod";
import { ScriptedModel } from "../src/model/testing/index.js";
import { runAgent } from "../src/runtime/index.js";
import type { Tool } from "../src/tools/index.js";

const RESULT = Array.from(
  { length: 5 },
  (_, i) => `${i + 1}. Title ${i}\nhttps://ex.org/${i}\nA snippet of about sixty characters of page text.`,
).join("\n");

const instantSearch: Tool<string> = {
  tag: "web_search",
  description: "returns a fixed result list at once",
  argsSchema: z.string(),
  parseArgs: (raw) => raw.trim(),
  run: async () => ({ text: RESULT, ok: true, truncated: false, elapsedMs: 0 }),
};

async function episode(steps: number) {
  const model = new ScriptedModel(({ index }) =>
    index < steps
      ? `<think>Step ${index}: the last result did not settle it.</think>\n<plan>Search with other words.</plan>\n<web_search>query number ${index}</web_search>`
      : "<suggested_answer>42</suggested_answer>\n<double_check>Consistent. Score: 5</double_check>\n<answer>42</answer>",
  );
  const traj = await runAgent({
    model,
    tools: new Map([["web_search", instantSearch]]),
    profile: "web",
    question: "What is the answer?",
    budget: { maxTurns: steps + 1, maxTokens: 1_000_000 },
  });
  if (traj.finishReason !== "answer") throw new Error(`bench episode ended with ${traj.finishReason}`);
  const { wallMs, modelMs, toolMs, modelCalls } = traj.stats;
  return {
    overheadMs: wallMs - modelMs - toolMs,
    steps: modelCalls,
    context: traj.stats.contextTokens / modelCalls,
  };
}

export async function run(): Promise<void> {
  for (const steps of [10, 40]) {
    for (let i = 0; i < 20; i++) await episode(steps); // warm up the JIT
    const perStep: number[] = [];
    let context = 0;
    const episodes = 200;
    for (let i = 0; i < episodes; i++) {
      const r = await episode(steps);
      perStep.push(r.overheadMs / r.steps);
      context += r.context / episodes;
    }
    perStep.sort((a, b) => a - b);
    const mean = perStep.reduce((a, b) => a + b, 0) / perStep.length;
    const p50 = perStep[Math.floor(perStep.length * 0.5)]!;
    const p99 = perStep[Math.floor(perStep.length * 0.99)]!;
    console.log(
      `runtime overhead, ${steps + 1} steps/episode (mean context ${Math.round(context)} tokens): ` +
        `mean ${(mean * 1000).toFixed(0)} µs/step, p50 ${(p50 * 1000).toFixed(0)} µs/step, p99 ${(p99 * 1000).toFixed(0)} µs/step (target < 1000 µs)`,
    );
  }
}
