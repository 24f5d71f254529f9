import { afterEach, describe, expect, it } from "vitest";
import { ByteTokenizer } from "./byte-tokenizer.js";
import { openModel } from "./open.js";
import { OpenAICompatibleClient } from "./openai-client.js";
import { type FixtureServer, type ServerFamily, startFakeServer } from "./testing/index.js";

const bytes = new ByteTokenizer();
const echo = () => "<think>x</think>\n<answer>42</answer> and more";
const messages = [
  { role: "system" as const, content: "S" },
  { role: "user" as const, content: "Q" },
];

let server: FixtureServer | undefined;
afterEach(async () => {
  await server?.close();
  server = undefined;
});

async function opened(family: ServerFamily, options: Parameters<typeof openModel>[1] = {}) {
  server = await startFakeServer(family, echo);
  const notices: string[] = [];
  const model = await openModel(`${server.url}/v1`, { ...options, onNotice: (l) => notices.push(l) });
  return { model, notices, server };
}

describe("openModel finds what a server supports", () => {
  it.each([
    ["vllm", "fake-vllm", []],
    ["sglang", "fake-sglang", []],
    ["llamacpp", "fake-llamacpp", []],
    ["ollama", "coa-byte-v1", ["has no /tokenize: text mode"]],
    ["openai", "coa-byte-v1", ["has no /tokenize: text mode", "has no /v1/completions"]],
  ] as const)("%s: vocabulary %s, one notice per fallback", async (family, tokenizer, said) => {
    const { model, notices } = await opened(family);
    expect(model.tokenizer).toBe(tokenizer);
    expect(notices).toHaveLength(said.length);
    for (const [i, s] of said.entries()) expect(notices[i]).toContain(s);
    const out = await model.complete({ prompt: "q", stop: ["</answer>"], maxTokens: 64 });
    // Every family ends on the stop string, kept, whether the server kept it or dropped it.
    expect(out.choices[0]).toMatchObject({
      text: "<think>x</think>\n<answer>42</answer>",
      stopSequence: "</answer>",
    });
  });

  it("asks nothing when text mode and route are both forced", async () => {
    const { server } = await opened("vllm", { modelName: "m", textOnly: true, api: "completions" });
    expect(server.requests).toHaveLength(0);
  });
});

describe("OpenAICompatibleClient.chatPrompt", () => {
  const client = (
    url: string,
    options: Partial<ConstructorParameters<typeof OpenAICompatibleClient>[0]> = {},
  ) => new OpenAICompatibleClient({ baseUrl: url, model: "fake-vllm", retryBaseMs: 1, ...options });

  it("renders messages through the server's template: exact ids", async () => {
    server = await startFakeServer("vllm", echo);
    const prompt = await client(server.url).chatPrompt(messages);
    expect(prompt).toEqual({
      ids: bytes.encode(
        "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nQ<|im_end|>\n<|im_start|>assistant\n",
      ),
      exact: true,
    });
    expect(server.bodies("POST /tokenize")[0]).toMatchObject({ messages, add_generation_prompt: true });
  });

  it("falls back once, with one notice, where the model has no template; `on` refuses; `off` never asks", async () => {
    server = await startFakeServer("vllm", echo, { chatTemplate: false });
    const notices: string[] = [];
    const auto = client(server.url, { onNotice: (l) => notices.push(l) });
    expect(await auto.chatPrompt(messages)).toBeNull();
    expect(await auto.chatPrompt(messages)).toBeNull();
    expect(notices).toHaveLength(1);
    expect(notices[0]).toMatch(/no chat template \(its \/tokenize renders no chat messages \(HTTP 400\)\)/);
    expect(server.bodies("POST /tokenize")).toHaveLength(1);
    await expect(client(server.url, { chatTemplate: "on" }).chatPrompt(messages)).rejects.toThrow(
      /cannot apply the model's chat template/,
    );
    expect(await client(server.url, { chatTemplate: "off" }).chatPrompt(messages)).toBeNull();
    expect(server.bodies("POST /tokenize")).toHaveLength(2);
  });

  it("on a chat-only route, stands for the messages with local ids marked inexact", async () => {
    server = await startFakeServer("openai", echo);
    const chat = client(server.url, {
      api: "chat",
      textOnly: true,
      tokenizer: bytes,
      serverExtensions: false,
    });
    const prompt = await chat.chatPrompt(messages);
    expect(prompt).toEqual({ ids: bytes.encode("system: S\n\nuser: Q"), exact: false });
    // The server gets the messages themselves, then the reply so far to continue.
    const reply = bytes.encode("<think>");
    await chat.complete({
      promptIds: [...prompt!.ids, ...reply],
      chat: { messages, promptTokens: prompt!.ids.length },
      stop: ["</answer>"],
      maxTokens: 64,
    });
    expect(server.bodies("POST /v1/chat/completions")[0]).toMatchObject({
      messages: [...messages, { role: "assistant", content: "<think>" }],
    });
  });
});

describe("native routes: exact ids where the OpenAI routes give none", () => {
  const stop = ["</answer>"];
  const kept = "<think>x</think>\n<answer>42</answer>";

  it("sglang: /generate with input_ids; output_ids, the stop kept and named, logprobs, n choices", async () => {
    const { model, server } = await opened("sglang");
    const prompt = bytes.encode("q");
    const out = await model.complete({
      promptIds: prompt,
      stop,
      maxTokens: 64,
      logprobs: true,
      n: 2,
      seed: 3,
    });
    expect(out.choices).toHaveLength(2);
    for (const c of out.choices) {
      expect(c).toMatchObject({ text: kept, stopSequence: "</answer>", finishReason: "stop" });
      expect(c.exactIds).toBeUndefined();
      expect(c.tokenIds).toEqual(bytes.encode(kept));
      expect(c.logprobs).toHaveLength(c.tokenIds.length);
    }
    expect(server.bodies("POST /generate")[0]).toEqual({
      input_ids: prompt,
      sampling_params: {
        max_new_tokens: 64,
        temperature: 1,
        top_p: 1,
        n: 2,
        stop,
        no_stop_trim: true,
        sampling_seed: 3,
      },
      return_logprob: true,
      logprob_start_len: -1,
    });
    expect(server.bodies("POST /v1/completions")).toHaveLength(0);
    // Its /detokenize answers `text`; at EOS nothing is named; the limit is `length`.
    expect(await model.detokenize(bytes.encode("héllo"))).toBe("héllo");
    const eos = await model.complete({ prompt: "q", stop: ["</nothing>"], maxTokens: 64 });
    expect(eos.choices[0]).toMatchObject({ stopSequence: null, finishReason: "stop" });
    const cut = await model.complete({ prompt: "q", stop, maxTokens: 5 });
    expect(cut.choices[0]).toMatchObject({
      text: bytes.decode(bytes.encode(kept).slice(0, 5)),
      finishReason: "length",
      stopSequence: null,
    });
  });

  it("llamacpp: /completion with ids; `tokens` hold the stopping word `content` drops; /apply-template", async () => {
    const { model, server, notices } = await opened("llamacpp");
    const prompt = bytes.encode("q");
    const out = await model.complete({ promptIds: prompt, stop, maxTokens: 64, logprobs: true });
    expect(out.choices[0]).toMatchObject({
      text: kept,
      stopSequence: "</answer>",
      tokenIds: bytes.encode(kept),
    });
    expect(out.choices[0]!.exactIds).toBeUndefined();
    expect(out.choices[0]!.logprobs).toHaveLength(bytes.encode(kept).length);
    expect(server.bodies("POST /completion")[0]).toMatchObject({
      prompt,
      n_predict: 64,
      stop,
      return_tokens: true,
      n_probs: 1,
    });
    expect(server.bodies("POST /v1/completions")).toHaveLength(0);
    expect(await model.tokenize("ab")).toEqual(bytes.encode("ab"));
    expect(server.bodies("POST /tokenize").at(-1)).toEqual({ content: "ab", add_special: false });
    expect(await model.detokenize(bytes.encode("ab"))).toBe("ab");
    expect(await model.chatPrompt!(messages)).toEqual({
      ids: bytes.encode(
        "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nQ<|im_end|>\n<|im_start|>assistant\n",
      ),
      exact: true,
    });
    expect(server.bodies("POST /apply-template")).toEqual([{ messages }]);
    expect(notices).toEqual([]);
  });

  it.each([
    ["llamacpp", "POST /completion"],
    ["sglang", "POST /generate"],
  ] as const)("%s --text-only: its OpenAI routes, the dropped stop restored", async (family, native) => {
    const { model, server } = await opened(family, { textOnly: true });
    const out = await model.complete({ prompt: "q", stop, maxTokens: 64, logprobs: true });
    expect(out.choices[0]).toMatchObject({ text: kept, stopSequence: "</answer>", exactIds: false });
    expect(out.choices[0]!.logprobs).toBeUndefined();
    expect(server.bodies(native)).toHaveLength(0);
    expect(server.bodies("POST /v1/completions").at(-1)).toMatchObject({ prompt: "q" });
  });
});
