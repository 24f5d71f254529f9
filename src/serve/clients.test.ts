import { createOpenAICompatible } from "@ai-sdk/openai-compatible";
import { generateText, streamText } from "ai";
import OpenAI from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Engine } from "../model/index.js";
import { completionIds, lossMask, type Trajectory } from "../protocol/index.js";
import { startTestServe, type TestServe } from "./testing.js";
import { ServedTrajectory } from "./trajectory-store.js";
import type { StepDelta } from "./wire.js";

// The official clients against `coa serve` backed by the embedded engine (micro preset, untrained):
// whatever it writes, the reply's usage and the kept trajectory must be the episode's real tokens.
let engine: Engine;
let serve: TestServe;
const question = "Who is the mayor of Veltmoor?";

beforeAll(async () => {
  engine = await Engine.start({ preset: "micro" }, { dtype: "fp32", onLog: () => {} });
  serve = await startTestServe(engine, {
    budget: { maxTurns: 2, maxFormatErrors: 20 },
    sampling: { maxTokensPerTurn: 16 },
  });
}, 120_000);
afterAll(async () => {
  await serve?.close();
  await engine?.close();
});

async function trajectoryOf(id: string): Promise<ServedTrajectory> {
  const res = await fetch(`${serve.url}/trajectories/${id}`);
  expect(res.status).toBe(200);
  return ServedTrajectory.parse(await res.json());
}

/** What OpenAI's usage must say of a trajectory: every token, the model's own as completion. */
function expectedUsage(t: Trajectory) {
  const total = t.promptIds.length + completionIds(t).length;
  const completion = lossMask(t).filter(Boolean).length;
  return { prompt_tokens: total - completion, completion_tokens: completion, total_tokens: total };
}

describe("the openai client", () => {
  const client = () => new OpenAI({ baseURL: serve.url, apiKey: "not-checked" });

  it("lists the served model", async () => {
    const models = await client().models.list();
    expect(models.data.map((m) => m.id)).toEqual([engine.name]);
  });

  it("gets the final answer as content, usage from the trajectory kept under the reply's id", async () => {
    const reply = await client().chat.completions.create({
      model: engine.name,
      messages: [
        { role: "system", content: "ignored: the profile's prompt is the agent's" },
        { role: "user", content: question },
      ],
      seed: 3,
      temperature: 0.8,
      max_tokens: 900,
    });
    expect(reply.id).toMatch(/^chatcmpl-/);
    const t = await trajectoryOf(reply.id);
    expect(reply.choices[0]!.message.content).toBe(t.answer ?? "");
    expect(reply.choices[0]!.finish_reason).toBe(t.finishReason === "answer" ? "stop" : "length");
    expect(reply.usage).toEqual(expectedUsage(t));
    expect(t).toMatchObject({ question, model: engine.name, origin: "serve" });
    // The request's fields reached the episode.
    expect(t.meta.runtime.sampling).toMatchObject({ seed: 3, temperature: 0.8 });
    expect(t.meta.runtime.budget).toMatchObject({ maxTokens: 900, maxTurns: 2 });
    expect((await serve.logged()).map((r) => r.meta.serve.responseId)).toContain(reply.id);
  });

  it("streams the steps in delta.coa_step, then the finish and the usage", async () => {
    const stream = await client().chat.completions.create({
      model: engine.name,
      messages: [{ role: "user", content: question }],
      seed: 4,
      stream: true,
      stream_options: { include_usage: true },
    });
    const steps: StepDelta[] = [];
    const finishes: (string | null)[] = [];
    let content = "";
    let usage: unknown;
    let id = "";
    for await (const chunk of stream) {
      id = chunk.id;
      if (chunk.usage) usage = chunk.usage;
      const choice = chunk.choices[0];
      if (!choice) continue;
      const step = (choice.delta as { coa_step?: StepDelta }).coa_step;
      if (step) steps.push(step);
      content += choice.delta.content ?? "";
      finishes.push(choice.finish_reason);
    }
    const t = await trajectoryOf(id);
    expect(content).toBe(t.answer ?? "");
    expect(finishes.filter(Boolean)).toEqual([t.finishReason === "answer" ? "stop" : "length"]);
    expect(usage).toEqual(expectedUsage(t));
    // An untrained model's turns come back as format errors: each one is streamed as it happens.
    const errors = t.meta.runtime.formatErrors.map((e) => e.message);
    expect(errors.length).toBeGreaterThan(0);
    const streamed = steps.filter((s) => s.kind === "format_error").map((s) => s.text);
    expect(streamed.join("\n")).toBe(errors.join("\n"));
  });
});

describe("the AI SDK (@ai-sdk/openai-compatible)", () => {
  const provider = () => createOpenAICompatible({ name: "coa", baseURL: serve.url, includeUsage: true });

  it("generateText: the answer as text, the episode's tokens as usage", async () => {
    const result = await generateText({ model: provider()(engine.name), prompt: question, seed: 5 });
    const t = await trajectoryOf(result.response.id);
    const usage = expectedUsage(t);
    expect(result.text).toBe(t.answer ?? "");
    expect(result.usage.inputTokens).toBe(usage.prompt_tokens);
    expect(result.usage.outputTokens).toBe(usage.completion_tokens);
  });

  it("streamText: text from content; the steps reach the raw chunks", async () => {
    const result = streamText({
      model: provider()(engine.name),
      prompt: question,
      seed: 6,
      maxOutputTokens: 800,
      includeRawChunks: true,
    });
    let text = "";
    const steps: StepDelta[] = [];
    for await (const part of result.fullStream) {
      if (part.type === "text-delta") text += part.text;
      if (part.type === "raw") {
        const step = (part.rawValue as { choices?: { delta?: { coa_step?: StepDelta } }[] }).choices?.[0]
          ?.delta?.coa_step;
        if (step) steps.push(step);
      }
    }
    const t = await trajectoryOf((await result.response).id);
    expect(text).toBe(t.answer ?? "");
    expect((await result.usage).outputTokens).toBe(expectedUsage(t).completion_tokens);
    expect(t.meta.runtime.budget).toMatchObject({ maxTokens: 800 });
    expect(steps.length).toBeGreaterThan(0);
  });
});
