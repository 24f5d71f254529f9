import { readdirSync, readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterEach, describe, expect, it } from "vitest";
import { ByteTokenizer } from "./byte-tokenizer.js";
import { ModelConnectionError, ModelHttpError, ModelResponseError } from "./errors.js";
import { OpenAICompatibleClient, type OpenAICompatibleOptions } from "./openai-client.js";
import { type FixtureHandler, FixtureServer, inOrder } from "./testing/index.js";

const bytes = new ByteTokenizer();
let fixture: FixtureServer | undefined;

afterEach(async () => {
  await fixture?.close();
  fixture = undefined;
});

async function serve(routes: Record<string, FixtureHandler>, delayMs = 0) {
  fixture = await FixtureServer.start(routes, delayMs);
  return fixture;
}

function client(url: string, options: Partial<OpenAICompatibleOptions> = {}) {
  return new OpenAICompatibleClient({
    baseUrl: `${url}/v1`,
    model: "m",
    timeoutMs: 2_000,
    maxRetries: 2,
    concurrency: 4,
    retryBaseMs: 10,
    ...options,
  });
}

/** A vLLM-style completions body for one choice. */
function completion(text: string, extra: Record<string, unknown> = {}) {
  return {
    json: {
      object: "text_completion",
      model: "m",
      choices: [{ index: 0, text, finish_reason: "stop", ...extra }],
      usage: { prompt_tokens: 7, completion_tokens: 3, total_tokens: 10 },
    },
  };
}

describe("OpenAICompatibleClient over /v1/completions", () => {
  it("sends a text prompt with sampling and vLLM fields, and reads ids, logprobs and the stop", async () => {
    const text = "<web_search>cats</web_search>";
    const ids = bytes.encode(text);
    const server = await serve({
      "POST /v1/completions": () =>
        completion(text, {
          token_ids: ids,
          logprobs: { tokens: ids.map(String), token_logprobs: ids.map(() => -0.5) },
          stop_reason: "</web_search>",
        }),
    });
    const result = await client(server.url).complete({
      prompt: "Q: cats?\n",
      stop: ["</web_search>", "</answer>"],
      maxTokens: 64,
      temperature: 0.7,
      topP: 0.9,
      n: 1,
      seed: 11,
      logprobs: true,
    });
    expect(server.bodies("POST /v1/completions")[0]).toMatchObject({
      model: "m",
      prompt: "Q: cats?\n",
      max_tokens: 64,
      temperature: 0.7,
      top_p: 0.9,
      n: 1,
      seed: 11,
      stop: ["</web_search>", "</answer>"],
      logprobs: 1,
      include_stop_str_in_output: true,
      return_token_ids: true,
    });
    expect(result).toEqual({
      model: "m",
      choices: [
        {
          text,
          tokenIds: ids,
          logprobs: ids.map(() => -0.5),
          finishReason: "stop",
          stopSequence: "</web_search>",
        },
      ],
      usage: { promptTokens: 7, completionTokens: 3 },
    });
  });

  it("asks for as many logprob alternatives as it is told (the embedded engine: none)", async () => {
    const server = await serve({
      "POST /v1/completions": () =>
        completion("hi", {
          finish_reason: "length",
          logprobs: { tokens: ["token_id:400", "token_id:401"], token_logprobs: [-1, -2] },
        }),
    });
    const options = { logprobAlternatives: 0 };
    const result = await client(server.url, options).complete({
      promptIds: [1, 2],
      maxTokens: 2,
      logprobs: true,
    });
    expect(server.bodies("POST /v1/completions")[0]).toMatchObject({ logprobs: 0 });
    expect(result.choices[0]?.logprobs).toEqual([-1, -2]);
  });

  it("sends token ids as the prompt and reads ids from 'token_id:N' logprob tokens", async () => {
    const server = await serve({
      "POST /v1/completions": () =>
        completion("hi", {
          finish_reason: "length",
          logprobs: { tokens: ["token_id:400", "token_id:401"], token_logprobs: [-1, -2] },
        }),
    });
    const result = await client(server.url).complete({ promptIds: [1, 2, 3], maxTokens: 2, logprobs: true });
    expect((server.bodies("POST /v1/completions")[0] as { prompt: unknown }).prompt).toEqual([1, 2, 3]);
    expect(result.choices[0]).toEqual({
      text: "hi",
      tokenIds: [400, 401],
      logprobs: [-1, -2],
      finishReason: "length",
      stopSequence: null,
    });
  });

  it("re-tokenizes through /tokenize when the server returns no ids, and marks them inexact", async () => {
    const server = await serve({
      "POST /v1/completions": () => completion("abc"),
      "POST /tokenize": (r) => ({ json: { tokens: bytes.encode((r.body as { prompt: string }).prompt) } }),
    });
    const result = await client(server.url).complete({ prompt: "x", maxTokens: 8 });
    expect(server.bodies("POST /tokenize")).toEqual([
      { model: "m", prompt: "abc", add_special_tokens: false },
    ]);
    expect(result.choices[0]).toMatchObject({ text: "abc", tokenIds: bytes.encode("abc"), exactIds: false });
  });

  it("puts back a stop string the server dropped, when it says which one matched", async () => {
    const server = await serve({
      "POST /v1/completions": () =>
        completion("<answer>4", { token_ids: bytes.encode("<answer>4"), stop_reason: "</answer>" }),
    });
    const result = await client(server.url, { tokenizer: bytes }).complete({
      prompt: "2+2",
      stop: ["</answer>"],
      maxTokens: 8,
    });
    expect(result.choices[0]).toMatchObject({
      text: "<answer>4</answer>",
      tokenIds: bytes.encode("<answer>4</answer>"),
      stopSequence: "</answer>",
      exactIds: false,
    });
  });

  it("infers a dropped stop from the open tag when the server does not name it (OpenAI, llama.cpp)", async () => {
    const server = await serve({
      "POST /v1/completions": () => completion("<think>x</think>\n<web_search>capital of Orla"),
    });
    const result = await client(server.url, {
      textOnly: true,
      tokenizer: bytes,
      serverExtensions: false,
    }).complete({
      prompt: "q",
      stop: ["</web_search>", "</answer>"],
      maxTokens: 32,
    });
    const text = "<think>x</think>\n<web_search>capital of Orla</web_search>";
    expect(result.choices[0]).toMatchObject({
      text,
      tokenIds: bytes.encode(text),
      stopSequence: "</web_search>",
      exactIds: false,
    });
  });

  it("leaves an EOS reply with no open tag unchanged", async () => {
    const server = await serve({
      "POST /v1/completions": () => completion("<answer>Orla</answer> done", { token_ids: [1, 2] }),
    });
    const result = await client(server.url).complete({ prompt: "q", stop: ["</answer>"], maxTokens: 8 });
    expect(result.choices[0]).toEqual({
      text: "<answer>Orla</answer> done",
      tokenIds: [1, 2],
      finishReason: "stop",
      stopSequence: null,
    });
  });

  it("returns n choices in index order and sums usage when the server sends none", async () => {
    const server = await serve({
      "POST /v1/completions": () => ({
        json: {
          choices: [
            { index: 1, text: "b", token_ids: [5], finish_reason: "stop" },
            { index: 0, text: "a", token_ids: [4, 4], finish_reason: "stop" },
          ],
        },
      }),
    });
    const result = await client(server.url).complete({ promptIds: [1], maxTokens: 4, n: 2 });
    expect(result.choices.map((c) => c.text)).toEqual(["a", "b"]);
    expect(result.usage).toEqual({ promptTokens: 1, completionTokens: 3 });
  });

  it("in text-only mode sends text and tokenizes locally", async () => {
    const server = await serve({ "POST /v1/completions": () => completion("ok", { token_ids: [9] }) });
    const c = client(server.url, { textOnly: true, tokenizer: bytes, serverExtensions: false });
    const result = await c.complete({ promptIds: bytes.encode("hello"), maxTokens: 4 });
    const body = server.bodies("POST /v1/completions")[0] as Record<string, unknown>;
    expect(body.prompt).toBe("hello");
    expect(body).not.toHaveProperty("return_token_ids");
    expect(result.choices[0]).toMatchObject({ tokenIds: bytes.encode("ok"), exactIds: false });
    expect(c.tokenizer).toBe(bytes.name);
  });
});

describe("OpenAICompatibleClient over /v1/chat/completions", () => {
  it("continues a final assistant message, detokenizing an ids prompt first", async () => {
    const server = await serve({
      "POST /detokenize": () => ({ json: { prompt: "so far" } }),
      "POST /v1/chat/completions": () => ({
        json: {
          model: "m",
          choices: [
            {
              index: 0,
              message: { role: "assistant", content: " more</answer>" },
              token_ids: [7, 8],
              logprobs: {
                content: [
                  { token: "token_id:7", logprob: -0.1 },
                  { token: "token_id:8", logprob: -0.2 },
                ],
              },
              finish_reason: "stop",
              stop_reason: "</answer>",
            },
          ],
          usage: { prompt_tokens: 3, completion_tokens: 2 },
        },
      }),
    });
    const c = client(server.url, { api: "chat", chatUserMessage: "Go on." });
    const result = await c.complete({
      promptIds: [1, 2, 3],
      stop: ["</answer>"],
      maxTokens: 8,
      logprobs: true,
    });
    expect(server.bodies("POST /detokenize")).toEqual([{ model: "m", tokens: [1, 2, 3] }]);
    expect(server.bodies("POST /v1/chat/completions")[0]).toMatchObject({
      messages: [
        { role: "user", content: "Go on." },
        { role: "assistant", content: "so far" },
      ],
      continue_final_message: true,
      add_generation_prompt: false,
      logprobs: true,
      stop: ["</answer>"],
    });
    expect(result.choices[0]).toEqual({
      text: " more</answer>",
      tokenIds: [7, 8],
      logprobs: [-0.1, -0.2],
      finishReason: "stop",
      stopSequence: "</answer>",
    });
  });
});

describe("tokenize, detokenize and models", () => {
  it("speak vLLM's /tokenize, /detokenize and /v1/models", async () => {
    const server = await serve({
      "POST /tokenize": () => ({ json: { tokens: [10, 11], count: 2, max_model_len: 4096 } }),
      "POST /detokenize": () => ({ json: { prompt: "hey" } }),
      "GET /v1/models": () => ({ json: { object: "list", data: [{ id: "qwen", object: "model" }] } }),
    });
    const c = client(server.url, { apiKey: "sk-test" });
    expect(await c.tokenize("hey")).toEqual([10, 11]);
    expect(await c.detokenize([10, 11])).toBe("hey");
    expect(await c.listModels()).toEqual(["qwen"]);
    expect(server.requests[0]!.headers.authorization).toBe("Bearer sk-test");
  });
});

describe("faults", () => {
  it("waits for Retry-After on 429, then succeeds", async () => {
    const server = await serve({
      "POST /v1/completions": inOrder(
        { status: 429, headers: { "retry-after": "0.3" }, json: { error: { message: "slow down" } } },
        completion("ok", { token_ids: [1] }),
      ),
    });
    const started = performance.now();
    const result = await client(server.url).complete({ prompt: "x", maxTokens: 4 });
    expect(performance.now() - started).toBeGreaterThanOrEqual(290);
    expect(result.choices[0]!.text).toBe("ok");
    expect(server.requests).toHaveLength(2);
  });

  it("retries a 500 with backoff, then succeeds", async () => {
    const server = await serve({
      "POST /v1/completions": inOrder({ status: 500, text: "boom" }, completion("ok", { token_ids: [1] })),
    });
    const result = await client(server.url).complete({ prompt: "x", maxTokens: 4 });
    expect(result.choices[0]!.text).toBe("ok");
    expect(server.requests).toHaveLength(2);
  });

  it("gives up after maxRetries and names the URL and status", async () => {
    const server = await serve({
      "POST /v1/completions": () => ({ status: 503, json: { message: "overloaded" } }),
    });
    const error = await client(server.url)
      .complete({ prompt: "x", maxTokens: 4 })
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ModelHttpError);
    expect(error).toMatchObject({ status: 503, attempts: 3 });
    expect((error as Error).message).toBe(
      `POST ${server.url}/v1/completions failed with HTTP 503: overloaded (after 3 attempts)`,
    );
  });

  // The embedded engine's client: failures are never retried (maxRetries 0), a full engine is.
  const engineLike = { maxRetries: 0, busyRetries: 3 };
  const full = (code = 503) => ({
    status: code,
    headers: { "retry-after": "0.05" },
    json: { error: { message: "the engine is at capacity", type: "overloaded_error", code: "queue_full" } },
  });

  it("waits out 503 and 429 with Retry-After under busyRetries, though maxRetries is 0", async () => {
    const server = await serve({
      "POST /v1/completions": inOrder(full(503), full(429), full(503), completion("ok", { token_ids: [1] })),
    });
    const result = await client(server.url, engineLike).complete({ prompt: "x", maxTokens: 4 });
    expect(result.choices[0]!.text).toBe("ok");
    expect(server.requests).toHaveLength(4);
  });

  it("fails with the server's reason once busyRetries are spent", async () => {
    const server = await serve({ "POST /v1/completions": () => full() });
    const error = await client(server.url, engineLike)
      .complete({ prompt: "x", maxTokens: 4 })
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ModelHttpError);
    expect(error).toMatchObject({ status: 503, attempts: 4 });
    expect((error as Error).message).toBe(
      `POST ${server.url}/v1/completions failed with HTTP 503: the engine is at capacity (after 4 attempts)`,
    );
    expect(server.requests).toHaveLength(4);
  });

  it("does not spend busyRetries on other failures", async () => {
    const server = await serve({
      "POST /v1/completions": inOrder({ status: 500, text: "boom" }, completion("ok", { token_ids: [1] })),
    });
    const error = await client(server.url, engineLike)
      .complete({ prompt: "x", maxTokens: 4 })
      .catch((e: unknown) => e);
    expect(error).toMatchObject({ status: 500, attempts: 1 });
    expect(server.requests).toHaveLength(1);
  });

  it("times out a hanging response, retries it, and says so", async () => {
    const server = await serve({ "POST /v1/completions": () => ({ hang: true }) });
    const error = await client(server.url, { timeoutMs: 150, maxRetries: 1 })
      .complete({ prompt: "x", maxTokens: 4 })
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ModelConnectionError);
    expect(error).toMatchObject({ timedOut: true, attempts: 2 });
    expect((error as Error).message).toContain("no answer within 150 ms");
    expect(server.requests).toHaveLength(2);
  });

  it("does not retry a 400 and passes on the server's message", async () => {
    const server = await serve({
      "POST /v1/completions": () => ({
        status: 400,
        json: { object: "error", message: "max_tokens is too large", code: 400 },
      }),
    });
    const error = await client(server.url)
      .complete({ prompt: "x", maxTokens: 4 })
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ModelHttpError);
    expect((error as Error).message).toContain("HTTP 400: max_tokens is too large");
    expect(server.requests).toHaveLength(1);
  });

  it("reports malformed JSON and bodies of the wrong shape without retrying", async () => {
    const server = await serve({
      "POST /v1/completions": () => ({ text: "{not json" }),
      "POST /tokenize": () => ({ json: { tokens: "nope" } }),
    });
    const c = client(server.url);
    await expect(c.complete({ prompt: "x", maxTokens: 4 })).rejects.toThrow(ModelResponseError);
    await expect(c.complete({ prompt: "x", maxTokens: 4 })).rejects.toThrow(/malformed JSON: \{not json/);
    await expect(c.tokenize("x")).rejects.toThrow(/\/tokenize returned an unexpected body: tokens:/);
    expect(server.requests).toHaveLength(3);
  });

  it("reports a refused connection as a connection error naming the URL", async () => {
    const server = await serve({});
    const url = server.url;
    await server.close();
    fixture = undefined;
    const error = await client(url, { maxRetries: 0 })
      .tokenize("x")
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ModelConnectionError);
    expect((error as Error).message).toContain(`POST ${url}/tokenize: request failed`);
  });

  it("stops at once when the caller aborts", async () => {
    const server = await serve({ "POST /v1/completions": () => ({ hang: true }) });
    const controller = new AbortController();
    setTimeout(() => controller.abort(new Error("user cancelled")), 50);
    await expect(
      client(server.url).complete({ prompt: "x", maxTokens: 4 }, { signal: controller.signal }),
    ).rejects.toThrow("user cancelled");
    expect(server.requests).toHaveLength(1);
  });

  it("keeps at most `concurrency` requests in flight", async () => {
    const server = await serve({ "POST /tokenize": () => ({ json: { tokens: [1] } }) }, 30);
    const c = client(server.url, { concurrency: 2 });
    await Promise.all(Array.from({ length: 6 }, () => c.tokenize("x")));
    expect(server.requests).toHaveLength(6);
    expect(server.maxInFlight).toBe(2);
  });
});

describe("dependencies", () => {
  it("uses Node's fetch, not the official openai client", () => {
    const here = dirname(fileURLToPath(import.meta.url));
    const sources = readdirSync(here).filter((f) => f.endsWith(".ts") && !f.endsWith(".test.ts"));
    for (const file of sources)
      expect(readFileSync(join(here, file), "utf8"), file).not.toMatch(/from "openai/);
    const pkg = JSON.parse(readFileSync(join(here, "../../package.json"), "utf8"));
    expect(pkg.dependencies).not.toHaveProperty("openai");
  });
});
