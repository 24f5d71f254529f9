// Agent endpoint overhead per request: the same scripted episode run by a direct runAgent call and
// through `coa serve` on loopback (HTTP, JSON parsing and checking, the SSE chunks, the JSONL append),
// one request at a time. The overhead is the difference of the medians.
import { z } from "zod";
import { ScriptedModel } from "../src/model/testing/index.js";
import type { ToolTag } from "../src/protocol/index.js";
import { runAgent } from "../src/runtime/index.js";
import { startTestServe } from "../src/serve/testing.js";
import type { Tool } from "../src/tools/index.js";

const STEPS = 4;

const instantSearch: Tool<string> = {
  tag: "web_search",
  description: "returns a fixed result at once",
  argsSchema: z.string(),
  parseArgs: (raw) => raw.trim(),
  run: async () => ({
    text: "1. A title\nhttps://ex.org/1\nA snippet.",
    ok: true,
    truncated: false,
    elapsedMs: 0,
  }),
};
const tools = new Map<ToolTag, Tool<string>>([["web_search", instantSearch]]);

/** Searches until STEPS observations are in the context, then answers: STEPS + 1 model calls. */
const model = new ScriptedModel(({ prompt }) =>
  (prompt.match(/<observation>/g)?.length ?? 0) <= STEPS
    ? "<think>Not settled yet.</think>\n<plan>Search again.</plan>\n<web_search>another query</web_search>"
    : "<suggested_answer>42</suggested_answer>\n<double_check>Consistent. Score: 5</double_check>\n<answer>42</answer>",
);

async function timed(n: number, once: () => Promise<void>): Promise<number[]> {
  const ms: number[] = [];
  for (let i = 0; i < n; i++) {
    const start = performance.now();
    await once();
    ms.push(performance.now() - start);
  }
  return ms.sort((a, b) => a - b);
}

const pct = (sorted: number[], p: number) =>
  sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * p))]!;
const fmt = (ms: number) => `${ms.toFixed(3)} ms`;

export async function run(): Promise<void> {
  const budget = { maxTurns: STEPS + 2, maxTokens: 1_000_000 };
  const serve = await startTestServe(model, { tools, budget, concurrency: 1 });
  const body = (stream: boolean) =>
    JSON.stringify({
      model: model.name,
      messages: [{ role: "user", content: "What is the answer?" }],
      stream,
    });
  const direct = async () => {
    const t = await runAgent({ model, tools, profile: "web", question: "What is the answer?", budget });
    if (t.answer !== "42") throw new Error(`bench episode ended with ${t.finishReason}`);
  };
  const served = (stream: boolean) => async () => {
    const res = await fetch(`${serve.url}/chat/completions`, { method: "POST", body: body(stream) });
    const text = await res.text();
    if (res.status !== 200 || !text.includes("42"))
      throw new Error(`bench request failed: ${res.status} ${text}`);
  };
  try {
    const n = 300;
    for (const once of [direct, served(false), served(true)]) await timed(50, once); // warm up the JIT
    const rows: [string, number[]][] = [
      ["direct runAgent", await timed(n, direct)],
      ["POST /v1/chat/completions", await timed(n, served(false))],
      ["  same, stream: true", await timed(n, served(true))],
    ];
    const base = pct(rows[0]![1], 0.5);
    console.log(`${STEPS + 1} model calls, ${STEPS} tool calls per episode; ${n} requests one at a time`);
    for (const [name, ms] of rows)
      console.log(
        `${name.padEnd(28)} p50 ${fmt(pct(ms, 0.5))}  p99 ${fmt(pct(ms, 0.99))}` +
          (name === "direct runAgent" ? "" : `  overhead p50 ${fmt(pct(ms, 0.5) - base)}`),
      );
  } finally {
    await serve.close();
  }
}
