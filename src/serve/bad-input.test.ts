import OpenAI from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { z } from "zod";
import type { ModelClient } from "../model/index.js";
import { ScriptedModel } from "../model/testing/index.js";
import type { Tool } from "../tools/index.js";
import { startTestServe, type TestServe } from "./testing.js";

// The model searches, then answers; its search tool waits until the episode is aborted (a client
// that leaves mid-stream), recording that it saw the abort.
const model = new ScriptedModel(({ prompt }) =>
  prompt.endsWith("Steps:\n")
    ? "<think>Look it up.</think>\n<web_search>anything</web_search>"
    : "<suggested_answer>x</suggested_answer>\n<double_check>Fine. Score: 5</double_check>\n<answer>x</answer>",
);
const aborts: unknown[] = [];
let searchDelayMs = 0;
const search: Tool<string> = {
  tag: "web_search",
  description: "answers after searchDelayMs, or records the abort that ends it first",
  argsSchema: z.string(),
  parseArgs: (raw) => raw.trim(),
  run: (_args, ctx) =>
    new Promise((resolve) => {
      const done = () => resolve({ text: "found", ok: true, truncated: false, elapsedMs: 0 });
      const timer = setTimeout(done, searchDelayMs);
      ctx.signal?.addEventListener("abort", () => {
        aborts.push(ctx.signal!.reason);
        clearTimeout(timer);
        done();
      });
    }),
};

let serve: TestServe;
beforeAll(async () => {
  serve = await startTestServe(model, {
    tools: new Map([["web_search", search]]),
    apiKey: "sk-test",
    maxBodyBytes: 4096,
  });
});
afterAll(() => serve?.close());

const auth = { authorization: "Bearer sk-test", "content-type": "application/json" };
const ask = (content = "q") => ({ model: "scripted", messages: [{ role: "user", content }] });

async function post(body: string, headers: Record<string, string> = auth) {
  const res = await fetch(`${serve.url}/chat/completions`, { method: "POST", headers, body });
  return { status: res.status, body: (await res.json()) as { error?: { message: string; type: string } } };
}

/** The server still answers a good request, and the log holds only whole records. */
async function stillServes() {
  const before = (await serve.logged()).length;
  const { status } = await post(JSON.stringify(ask()));
  expect(status).toBe(200);
  expect(await serve.logged()).toHaveLength(before + 1);
}

describe("bad input gets an OpenAI-style error and the server keeps serving", () => {
  it.each([
    ["malformed JSON", "{not json", 400, /not valid JSON/],
    ["no messages", JSON.stringify({ model: "scripted", messages: [] }), 400, /^messages: /],
    ["an unknown field", JSON.stringify({ ...ask(), tools: [] }), 400, /unsupported field "tools"/],
    ["a bad field value", JSON.stringify({ ...ask(), temperature: "hot" }), 400, /^temperature: /],
    ["n > 1", JSON.stringify({ ...ask(), n: 2 }), 400, /^n: /],
    [
      "no user text",
      JSON.stringify({ model: "scripted", messages: [{ role: "system", content: "x" }] }),
      400,
      /last user message/,
    ],
    ["an unknown model", JSON.stringify({ ...ask(), model: "gpt-4o" }), 404, /not served here/],
    ["an oversized body", JSON.stringify(ask("x".repeat(5000))), 413, /over 4096 bytes/],
  ])("%s", async (_what, body, status, message) => {
    const reply = await post(body);
    expect(reply.status).toBe(status);
    expect(reply.body.error?.message).toMatch(message);
    expect(reply.body.error?.type).toMatch(/_error$/);
    await stillServes();
  });

  it("refuses a missing or wrong API key with 401, through the openai client too", async () => {
    expect((await post(JSON.stringify(ask()), { "content-type": "application/json" })).status).toBe(401);
    const res = await fetch(`${serve.url}/models`, { headers: { authorization: "Bearer sk-wrong" } });
    expect(res.status).toBe(401);
    expect(((await res.json()) as { error: { type: string } }).error.type).toBe("authentication_error");
    const wrong = new OpenAI({ baseURL: serve.url, apiKey: "sk-wrong", maxRetries: 0 });
    await expect(
      wrong.chat.completions.create({ model: "scripted", messages: [{ role: "user", content: "q" }] }),
    ).rejects.toBeInstanceOf(OpenAI.AuthenticationError);
    const right = new OpenAI({ baseURL: serve.url, apiKey: "sk-test" });
    expect(
      (await right.chat.completions.create({ model: "scripted", messages: [{ role: "user", content: "q" }] }))
        .choices[0]!.message.content,
    ).toBe("x");
  });

  it("answers an unknown trajectory id with 404", async () => {
    const res = await fetch(`${serve.url}/trajectories/chatcmpl-nope`, { headers: auth });
    expect(res.status).toBe(404);
    expect(await res.json()).toMatchObject({ error: { type: "not_found_error" } });
  });

  it("aborts the episode of a client that leaves mid-stream, logging nothing of it", async () => {
    const before = (await serve.logged()).length;
    searchDelayMs = 60_000;
    aborts.length = 0;
    const client = new AbortController();
    const res = await fetch(`${serve.url}/chat/completions`, {
      method: "POST",
      headers: auth,
      body: JSON.stringify({ ...ask(), stream: true }),
      signal: client.signal,
    });
    const reader = res.body!.getReader();
    let seen = "";
    // Leave once the tool call has streamed: the search is running, and would for a minute.
    while (!seen.includes('"kind":"tool_call"'))
      seen += new TextDecoder().decode((await reader.read()).value);
    client.abort();
    await expect.poll(() => aborts.length).toBe(1);
    searchDelayMs = 0;
    expect(await serve.logged()).toHaveLength(before);
    await stillServes();
  });

  it("answers a failed model with 502, the episode kept under the id it names", async () => {
    const broken: ModelClient = {
      name: "broken",
      tokenizer: "coa-byte-v1",
      tokenize: async () => [1, 2, 3],
      detokenize: async () => "",
      complete: () => Promise.reject(new Error("GPU on fire")),
    };
    const down = await startTestServe(broken);
    try {
      const res = await fetch(`${down.url}/chat/completions`, {
        method: "POST",
        body: JSON.stringify({ ...ask(), model: "broken" }),
      });
      expect(res.status).toBe(502);
      const { error } = (await res.json()) as { error: { message: string; code: string } };
      expect(error).toMatchObject({ code: "model_error", message: expect.stringMatching(/GPU on fire/) });
      const id = /trajectories\/(chatcmpl-[\w-]+)/.exec(error.message)![1]!;
      const kept = await fetch(`${down.url}/trajectories/${id}`);
      expect(await kept.json()).toMatchObject({ finishReason: "model_error" });
      // Streaming, the headers are gone when the model fails: the error comes as an event.
      const stream = await new OpenAI({ baseURL: down.url, apiKey: "x" }).chat.completions.create({
        model: "broken",
        messages: [{ role: "user", content: "q" }],
        stream: true,
      });
      const drain = async () => {
        for await (const _ of stream);
      };
      await expect(drain()).rejects.toThrow(/GPU on fire/);
    } finally {
      await down.close();
    }
  });
});
