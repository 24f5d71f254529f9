import OpenAI from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { z } from "zod";
import { type ScriptCall, ScriptedModel } from "../model/testing/index.js";
import { createToolset, type Tool } from "../tools/index.js";
import { writeCorpusFile } from "../tools/test-corpus.js";
import { startTestServe, type TestServe } from "./testing.js";
import type { StepDelta } from "./wire.js";

// A scripted model that takes real tool steps over a real corpus: it searches for the question,
// then answers with the question echoed, so concurrent replies can be told apart.
const askedOf = (prompt: string) => /\nQuestion: (.*)\nSteps:\n/.exec(prompt)![1]!;
function agentScript({ prompt }: ScriptCall): string {
  const asked = askedOf(prompt);
  if (prompt.endsWith("Steps:\n"))
    return `<think>Find who runs the town.</think>\n<plan>Search the wiki.</plan>\n<web_search>${asked}</web_search>`;
  return `<suggested_answer>Ilse Brandt (${asked})</suggested_answer>\n<double_check>The page says so. Score: 5</double_check>\n<answer>Ilse Brandt (${asked})</answer>`;
}

let serve: TestServe;
const model = new ScriptedModel(agentScript, { name: "coa-scripted", latencyMs: 100 });

beforeAll(async () => {
  const tools = createToolset({ profile: "web", corpus: await writeCorpusFile(), crawl: { offline: true } });
  serve = await startTestServe(model, { tools, concurrency: 2 });
});
afterAll(() => serve?.close());

const client = () => new OpenAI({ baseURL: serve.url, apiKey: "not-checked" });

describe("coa serve with a scripted model and the real tools", () => {
  it("streams think, plan, the tool call and its observation, then the answer as content", async () => {
    const stream = await client().chat.completions.create({
      model: "coa-scripted",
      messages: [{ role: "user", content: [{ type: "text", text: "Veltmoor mayor" }] }],
      stream: true,
    });
    const steps: StepDelta[] = [];
    let content = "";
    for await (const chunk of stream) {
      const delta = chunk.choices[0]?.delta as { content?: string; coa_step?: StepDelta } | undefined;
      if (delta?.coa_step) steps.push(delta.coa_step);
      content += delta?.content ?? "";
    }
    expect(steps.map((s) => s.kind)).toEqual([
      "think",
      "plan",
      "tool_call",
      "observation",
      "suggested_answer",
      "double_check",
    ]);
    expect(steps[2]).toEqual({ kind: "tool_call", tool: "web_search", text: "Veltmoor mayor" });
    // The observation is the search tool's real result over the corpus.
    expect(steps[3]!.text).toContain("Ilse Brandt");
    expect(content).toBe("Ilse Brandt (Veltmoor mayor)");
  });

  it("runs requests concurrently, at most --concurrency at once, each logged as one whole line", async () => {
    const before = (await serve.logged()).length;
    model.peakInFlight = 0;
    const questions = ["Veltmoor", "Arden", "Dunmere", "glass bridge"];
    const started = performance.now();
    const replies = await Promise.all(
      questions.map((q) =>
        client().chat.completions.create({ model: "coa-scripted", messages: [{ role: "user", content: q }] }),
      ),
    );
    const elapsed = performance.now() - started;
    expect(replies.map((r) => r.choices[0]!.message.content)).toEqual(
      questions.map((q) => `Ilse Brandt (${q})`),
    );
    // Each episode is two 100 ms model calls: four episodes take 800 ms in series, 400 two at a time,
    // 200 all at once.
    expect(elapsed).toBeGreaterThanOrEqual(390);
    expect(elapsed).toBeLessThan(700);
    // The bound itself, independent of the clock: two model calls at once, never more.
    expect(model.peakInFlight).toBe(2);
    const logged = await serve.logged();
    expect(logged).toHaveLength(before + questions.length);
    expect(new Set(logged.map((t) => t.meta.serve.responseId))).toEqual(
      new Set([...logged.slice(0, before).map((t) => t.meta.serve.responseId), ...replies.map((r) => r.id)]),
    );
  });
});

describe("a tool that hangs", () => {
  it("is cut at the tool timeout, read by the model as a failed observation, and the server goes on", async () => {
    const hang: Tool<string> = {
      tag: "web_search",
      description: "never answers, and ignores its signal",
      argsSchema: z.string(),
      parseArgs: (raw) => raw.trim(),
      run: () => new Promise(() => {}),
    };
    const hanging = await startTestServe(new ScriptedModel(agentScript, { name: "coa-scripted" }), {
      tools: new Map([["web_search", hang]]),
      toolTimeoutMs: 200,
    });
    try {
      const c = new OpenAI({ baseURL: hanging.url, apiKey: "x" });
      const reply = await c.chat.completions.create({
        model: "coa-scripted",
        messages: [{ role: "user", content: "Veltmoor" }],
      });
      expect(reply.choices[0]!.message.content).toBe("Ilse Brandt (Veltmoor)");
      const [t] = await hanging.logged();
      expect(t!.meta.runtime.calls[0]!.toolMs).toBeGreaterThanOrEqual(195);
    } finally {
      await hanging.close();
    }
  });
});
