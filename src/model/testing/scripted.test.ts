import { describe, expect, it } from "vitest";
import { ByteTokenizer } from "../byte-tokenizer.js";
import { ScriptedModel } from "./scripted.js";

const bytes = new ByteTokenizer();

describe("ScriptedModel", () => {
  it("cuts at the stop string that completes first and keeps it, like a streaming server", async () => {
    const model = new ScriptedModel(["<think>a</think><code>x</code><answer>1</answer> trailing"]);
    const result = await model.complete({ prompt: "p", stop: ["</answer>", "</code>"], maxTokens: 100 });
    const choice = result.choices[0]!;
    expect(choice.text).toBe("<think>a</think><code>x</code>");
    expect(choice.stopSequence).toBe("</code>");
    expect(choice.finishReason).toBe("stop");
    expect(choice.tokenIds).toEqual(bytes.encode(choice.text));
    expect(result.usage).toEqual({ promptTokens: 1, completionTokens: choice.tokenIds.length });
  });

  it("ends with finish 'length' after maxTokens ids, even when a stop string comes later", async () => {
    const model = new ScriptedModel(["<answer>abcdef</answer>"]);
    const choice = (await model.complete({ promptIds: [1], stop: ["</answer>"], maxTokens: 4 })).choices[0]!;
    expect(choice).toMatchObject({ text: "<answer>abc", finishReason: "length", stopSequence: null });
    expect(choice.tokenIds).toHaveLength(4);
  });

  it("ends with finish 'stop' and no stop string when the continuation runs out, as at EOS", async () => {
    const model = new ScriptedModel(["<think>done</think>"]);
    const choice = (await model.complete({ prompt: "p", stop: ["</answer>"], maxTokens: 99 })).choices[0]!;
    expect(choice).toMatchObject({ text: "<think>done</think>", finishReason: "stop", stopSequence: null });
  });

  it("serves continuations in order, n at a time, and fails clearly when the script runs out", async () => {
    const model = new ScriptedModel(["a", "b", "c"]);
    const two = await model.complete({ prompt: "p", maxTokens: 5, n: 2 });
    expect(two.choices.map((c) => c.text)).toEqual(["a", "b"]);
    expect((await model.complete({ prompt: "p", maxTokens: 5 })).choices[0]!.text).toBe("c");
    await expect(model.complete({ prompt: "p", maxTokens: 5 })).rejects.toThrow(
      "ScriptedModel: no continuation left (the script has 3)",
    );
    expect(model.calls).toBe(3);
    expect(model.requests).toHaveLength(3);
  });

  it("computes continuations from the decoded prompt when given a function", async () => {
    const model = new ScriptedModel(({ prompt, index }) => `<answer>${prompt.length}:${index}</answer>`);
    const choice = (await model.complete({ promptIds: bytes.encode("héllo"), maxTokens: 50 })).choices[0]!;
    expect(choice.text).toBe("<answer>5:0</answer>");
  });

  it("gives deterministic fake logprobs, one per id, only when asked", async () => {
    const model = new ScriptedModel(["ab", "ab", "ab"]);
    const a = (await model.complete({ prompt: "p", maxTokens: 9, logprobs: true })).choices[0]!;
    const b = (await model.complete({ prompt: "p", maxTokens: 9, logprobs: true })).choices[0]!;
    const none = (await model.complete({ prompt: "p", maxTokens: 9 })).choices[0]!;
    expect(a.logprobs).toHaveLength(a.tokenIds.length);
    expect(a.logprobs).toEqual(b.logprobs);
    expect(a.logprobs!.every((l) => l < 0)).toBe(true);
    expect(none.logprobs).toBeUndefined();
  });

  it("tokenizes and detokenizes with the byte tokenizer, tags as single tokens", async () => {
    const model = new ScriptedModel([]);
    const ids = await model.tokenize("<answer>é</answer>");
    expect(ids).toHaveLength(4);
    expect(await model.detokenize(ids)).toBe("<answer>é</answer>");
    expect(model.tokenizer).toBe(bytes.name);
  });

  it("honours the abort signal while simulating latency", async () => {
    const model = new ScriptedModel(["x"], { latencyMs: 5_000 });
    const controller = new AbortController();
    setTimeout(() => controller.abort(), 20);
    await expect(
      model.complete({ prompt: "p", maxTokens: 1 }, { signal: controller.signal }),
    ).rejects.toThrow();
  });
});
