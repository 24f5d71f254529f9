import { mkdtemp, readFile, rm } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import OpenAI from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { tagTokens } from "../protocol/index.js";
import { BYTE_TOKENIZER_NAME, ByteTokenizer, EOS_ID } from "./byte-tokenizer.js";
import { Engine } from "./engine.js";
import { readCheckpointManifest } from "./engine-checkpoint.js";
import { EngineLaunch } from "./engine-launch.js";
import { ModelHttpError } from "./errors.js";
import { launchModel, openModel } from "./open.js";
import { engineChildren } from "./testing/index.js";

const quiet = { onLog: () => {}, maxSeqLen: 512 };
const specialsFile = new URL("../../engine/coa_engine/specials.json", import.meta.url);

interface Reply {
  status: number;
  json: { tokens: number[]; prompt: string; error: { message: string } };
}

async function post(engine: Engine, route: string, body: unknown): Promise<Reply> {
  const res = await fetch(`${engine.url}${route}`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: typeof body === "string" ? body : JSON.stringify(body),
  });
  return { status: res.status, json: await res.json() };
}

/** Sequences where the completion after `prompt` is what the model should learn. */
function sftExample(tokenizer: ByteTokenizer, prompt: string, completion: string) {
  const p = [1, ...tokenizer.encode(prompt)];
  const c = [...tokenizer.encode(completion), 2];
  return { input_ids: [...p, ...c], loss_mask: [...p.map(() => 0), ...c.map(() => 1)] };
}

describe("specials.json", () => {
  it("is the protocol's tag list, so Python can run on its own", async () => {
    const file = JSON.parse(await readFile(specialsFile, "utf8"));
    expect(file).toEqual({ name: BYTE_TOKENIZER_NAME, tags: tagTokens() });
  });
});

describe("Engine (micro preset)", () => {
  let engine: Engine;
  const tokenizer = new ByteTokenizer();

  // fp32: these tests pin down sampling and logprob semantics to 1e-4, which bf16 rounding exceeds.
  beforeAll(async () => {
    engine = await Engine.start({ preset: "micro" }, { ...quiet, dtype: "fp32" });
  });
  afterAll(() => engine?.close());

  it("reports what it serves", async () => {
    const info = await engine.info();
    expect(info.model).toBe("coa-micro");
    expect(info.tokenizer).toEqual({ name: BYTE_TOKENIZER_NAME, vocab_size: tokenizer.vocabSize });
    expect(info.params).toBeGreaterThan(300_000);
    expect(info.params).toBeLessThan(700_000);
    expect(info.dtype).toBe("fp32");
    // With glibc (this project's machines), freed tensor memory stays for reuse (allocator.py).
    const report = process.report.getReport() as { header: { glibcVersionRuntime?: string } };
    if (report.header.glibcVersionRuntime) expect(info.malloc?.tuned).toBe(true);
    // Started with glibc's malloc asked for huge pages (engine-process.ts), unless this environment says.
    if (!process.env.GLIBC_TUNABLES && !process.env.COA_ENGINE_MALLOC) expect(info.malloc?.hugetlb).toBe("1");
  });

  it("counts the tokens it generated, its decode steps and where its busy time went", async () => {
    const before = (await engine.info()).counters;
    const reply = await post(engine, "/v1/completions", {
      prompt: [1, 3],
      max_tokens: 12,
      temperature: 0,
      ignore_eos: true,
    });
    expect(reply.status).toBe(200);
    const after = (await engine.info()).counters;
    expect(after.generated_tokens - before.generated_tokens).toBe(12);
    // The first token comes from the prompt's logits: a decode step that fed the prompt (with the fused
    // attention kernel) or a prefill; each later one from a decode step, or from a drafted id a step
    // checked and kept (a fresh model's greedy text repeats itself, so some are).
    const steps = after.decode_steps! - before.decode_steps!;
    const accepted = after.accepted_tokens! - before.accepted_tokens!;
    const stepped = after.stepped_prefills! - before.stepped_prefills!;
    expect(accepted).toBeGreaterThan(0);
    expect(stepped).toBeLessThanOrEqual(1);
    expect(steps + accepted).toBe(11 + stepped);
    expect(after.admit_seconds! + after.decode_seconds!).toBeLessThanOrEqual(after.generation_seconds + 1e-3);
    expect(after.generation_cpu_seconds!).toBeGreaterThan(before.generation_cpu_seconds!);
    expect(after.generation_cpu_seconds!).toBeLessThanOrEqual(after.generation_seconds + 1e-3);
  });

  it("tokenizes and detokenizes exactly like ByteTokenizer", async () => {
    const texts = [
      "plain ascii",
      "<think>naïve café 日本語 🎉</think>",
      "<answer>a</answer><answer",
      "</think </thinking> <thin>k> <<plan>>",
      "<web_search>q</web_search><observation>x</observation>",
      "lone \ud800 surrogate and a pair 😀",
      "",
    ];
    for (const text of texts) {
      const { json } = await post(engine, "/tokenize", { prompt: text });
      expect(json.tokens, text).toEqual(tokenizer.encode(text));
      expect((await post(engine, "/detokenize", { tokens: json.tokens })).json.prompt).toBe(
        tokenizer.decode(json.tokens),
      );
    }
    const broken = [
      tokenizer.byteOffset + 0xe6,
      tokenizer.byteOffset + 0x97,
      4,
      tokenizer.byteOffset + 0xff,
      0,
      1,
      2,
    ];
    expect((await post(engine, "/detokenize", { tokens: broken })).json.prompt).toBe(
      tokenizer.decode(broken),
    );
  });

  it("generates the same samples under the same seed, and other ones under another", async () => {
    const req = { prompt: "<think>", maxTokens: 24, temperature: 1, seed: 42, n: 2 };
    const a = await engine.complete(req);
    const b = await engine.complete(req);
    const c = await engine.complete({ ...req, seed: 43 });
    expect(a.choices.map((x) => x.tokenIds)).toEqual(b.choices.map((x) => x.tokenIds));
    expect(a.choices[0]!.tokenIds).not.toEqual(a.choices[1]!.tokenIds);
    expect(c.choices[0]!.tokenIds).not.toEqual(a.choices[0]!.tokenIds);
    expect(a.usage).toEqual({ promptTokens: 1, completionTokens: 48 });
  });

  it("stops on a stop string, keeps it, and returns n samples per prompt", async () => {
    const base = { promptIds: [1, 3], maxTokens: 64, temperature: 1, seed: 7 };
    const free = await engine.complete({ ...base, n: 3 });
    // A stop string the first free sample wrote: its first two printable ASCII characters in a row.
    const text = free.choices[0]!.text;
    const stop = /[ -~]{2}/.exec(text)![0];
    const stopped = await engine.complete({ ...base, n: 3, stop: [stop, "\u0000never"] });
    expect(stopped.choices).toHaveLength(3);
    const first = stopped.choices[0]!;
    expect(first.finishReason).toBe("stop");
    expect(first.stopSequence).toBe(stop);
    expect(first.text).toBe(text.slice(0, text.indexOf(stop) + stop.length));
    expect(first.tokenIds).toEqual(free.choices[0]!.tokenIds.slice(0, first.tokenIds.length));
    expect(tokenizer.decode(first.tokenIds)).toBe(first.text);
    // Every sample ends on a stop string (kept), the end-of-sequence token, or its length.
    for (const c of stopped.choices) {
      if (c.stopSequence !== null) expect(c.text.endsWith(c.stopSequence)).toBe(true);
      else expect(c.finishReason === "length" || c.tokenIds.at(-1) === EOS_ID).toBe(true);
    }
  });

  it("returns logprobs that a forward pass reproduces within 1e-4", async () => {
    for (const temperature of [1, 0.7]) {
      const prompt = [1, ...tokenizer.encode("<plan>")];
      const out = await engine.complete({
        promptIds: prompt,
        maxTokens: 40,
        temperature,
        seed: 3,
        n: 2,
        logprobs: true,
      });
      const [scored] = [
        await engine.score(
          out.choices.map((c) => [...prompt, ...c.tokenIds]),
          temperature,
        ),
      ];
      out.choices.forEach((c, i) => {
        const recomputed = scored[i]!.slice(prompt.length);
        expect(c.logprobs).toHaveLength(c.tokenIds.length);
        c.logprobs!.forEach((lp, t) => {
          expect(Math.abs(lp - recomputed[t]!)).toBeLessThan(1e-4);
        });
      });
    }
  });

  it("completes through the official openai client", async () => {
    const openai = new OpenAI({ baseURL: engine.baseUrl, apiKey: "unused", maxRetries: 0 });
    const res = await openai.completions.create({
      model: engine.name,
      prompt: ["<think>", "<plan>"],
      max_tokens: 8,
      temperature: 0,
      n: 2,
      logprobs: 1,
    });
    expect(res.object).toBe("text_completion");
    expect(res.choices.map((c) => c.index)).toEqual([0, 1, 2, 3]);
    // Greedy: both samples of a prompt agree.
    expect(res.choices[0]!.text).toBe(res.choices[1]!.text);
    const logprobs = res.choices[0]!.logprobs?.token_logprobs ?? [];
    expect(logprobs.length).toBeGreaterThan(0);
    expect(logprobs.length).toBeLessThanOrEqual(8);
    expect(res.usage?.prompt_tokens).toBe(2);
    expect((await openai.models.list()).data.map((m) => m.id)).toEqual([engine.name]);
  });

  it("answers bad requests with 4xx and a message, and keeps serving", async () => {
    const bad: [string, unknown, number][] = [
      ["/v1/completions", { prompt: "x", max_tokens: 0 }, 400],
      ["/v1/completions", { prompt: [99999], max_tokens: 2 }, 400],
      ["/v1/completions", { prompt: "x", stream: true }, 400],
      ["/v1/completions", { prompt: "x".repeat(600), max_tokens: 2 }, 400],
      ["/v1/completions", "{not json", 400],
      ["/train/sft", { batch: [{ input_ids: [1, 2, 3], loss_mask: [0, 1] }] }, 400],
      ["/train/sft", { batch: [{ input_ids: [1, 2, 3], loss_mask: [0, 0, 0] }] }, 400],
      ["/train/policy", { batch: [{ input_ids: [1, 5, 6], loss_mask: [0, 1, 1] }] }, 400],
      [
        "/train/policy",
        { batch: [{ input_ids: [1, 5, 6], loss_mask: [0, 1, 1], advantages: [1, 2, 3, 4] }] },
        400,
      ],
      ["/train/config", { learning_rate: 1 }, 400],
      ["/checkpoint/load", { dir: "/nonexistent/checkpoint" }, 400],
      ["/nowhere", {}, 404],
    ];
    for (const [route, body, status] of bad) {
      const res = await post(engine, route, body);
      expect(res.status, `${route} ${JSON.stringify(body)}`).toBe(status);
      expect(typeof res.json.error.message).toBe("string");
    }
    const rejected = await engine.trainSft({ batch: [{ input_ids: [1], loss_mask: [0] }] }).catch((e) => e);
    expect(rejected).toBeInstanceOf(ModelHttpError);
    expect(rejected.message).toMatch(/input_ids has 1 tokens/);
    expect((await fetch(`${engine.url}/health`)).status).toBe(200);
  });

  it("SFT drives the loss on a fixed tiny dataset below 0.5", async () => {
    await engine.configureOptimizer({ lr: 3e-3 });
    const batch = [
      sftExample(tokenizer, "Q: 2+2?", "<answer>4</answer>"),
      sftExample(tokenizer, "Q: capital of France?", "<answer>Paris</answer>"),
    ];
    const first = await engine.trainSft({ batch });
    let last = first;
    for (let i = 0; i < 80 && last.loss >= 0.5; i++) last = await engine.trainSft({ batch });
    expect(first.loss).toBeGreaterThan(4);
    expect(last.loss).toBeLessThan(0.5);
    expect(last.step).toBeGreaterThan(first.step);
    expect((await engine.evalSft({ batch })).loss).toBeLessThan(0.5);
    const greedy = await engine.complete({
      promptIds: batch[0]!.input_ids.slice(0, 8),
      maxTokens: 20,
      temperature: 0,
      stop: ["</answer>"],
    });
    expect(greedy.choices[0]!.text).toBe("<answer>4</answer>");
  });

  it("a policy step raises sampled tokens' logprobs for positive advantage and lowers them for negative", async () => {
    const prompt = [1, ...tokenizer.encode("<think>")];
    for (const [advantage, sign] of [
      [1, 1],
      [-1, -1],
    ] as const) {
      const out = await engine.complete({
        promptIds: prompt,
        maxTokens: 16,
        temperature: 1,
        seed: 9,
        logprobs: true,
      });
      const c = out.choices[0]!;
      const ids = [...prompt, ...c.tokenIds];
      const mask = ids.map((_, i) => (i >= prompt.length ? 1 : 0));
      const sum = async () =>
        (await engine.score([ids]))[0]!.slice(prompt.length).reduce((a: number, b) => a + b!, 0);
      const before = await sum();
      const res = await engine.trainPolicy({
        batch: [{ input_ids: ids, loss_mask: mask, advantages: advantage, old_logprobs: c.logprobs! }],
        lr: 1e-3,
        clip_low: 0.2,
        clip_high: 0.28,
        agg: "token-mean",
        kl_coef: 0,
        temperature: 1,
      });
      expect(res.clip_frac).toBe(0);
      expect(res.approx_kl).toBeLessThan(1e-6);
      expect(Math.sign((await sum()) - before)).toBe(sign);
    }
  });

  it("saves and loads checkpoints through the API", async () => {
    const dir = await mkdtemp(path.join(os.tmpdir(), "coa-engine-"));
    try {
      const saved = await engine.saveCheckpoint(dir);
      const manifest = await readCheckpointManifest(dir);
      expect(manifest.step).toBe(saved.step);
      expect(manifest.tokenizer.tags).toEqual(tagTokens());
      const req = { promptIds: [1, 5], maxTokens: 12, seed: 1 };
      const before = await engine.complete(req);
      await engine.trainSft({ batch: [sftExample(tokenizer, "a", "b")], lr: 1e-2 });
      const loaded = await engine.loadCheckpoint(dir);
      expect(loaded.step).toBe(saved.step);
      expect((await engine.complete(req)).choices[0]!.tokenIds).toEqual(before.choices[0]!.tokenIds);
      // An engine started on it takes the vocabulary from the manifest, read while Python started.
      const logs: string[] = [];
      const reopened = await Engine.start(
        { checkpoint: dir },
        { ...quiet, logRequests: true, onLog: (l) => logs.push(l) },
      );
      await reopened.close();
      expect(reopened.localTokenizer?.name).toBe(engine.tokenizer);
      expect(logs.filter((l) => /^GET \//.test(l.replace(/^\[[^\]]*\] /, "")))).toEqual([
        expect.stringMatching(/GET \/info 200/),
      ]);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});

describe("Engine at capacity", () => {
  it("retries completions the full engine refused (503, Retry-After) and gets them all", async () => {
    // One row decodes and one waits; every other concurrent request is refused until they are done.
    const engine = await Engine.start(
      { preset: "micro" },
      { ...quiet, dtype: "fp32", maxBatch: 1, maxQueue: 1 },
    );
    try {
      const request = (i: number) => ({ promptIds: [1, 3 + i], maxTokens: 160, temperature: 0 });
      const together = await Promise.all([0, 1, 2, 3, 4].map((i) => engine.complete(request(i))));
      const info = await engine.info();
      expect(info.capacity).toMatchObject({ max_rows: 1, max_queued_rows: 1, queued_rows: 0 });
      expect(info.capacity!.refused).toBeGreaterThan(0);
      // Full rows and queue refuse completions, not connections: the limit leaves room past them.
      expect(info.connections).toMatchObject({ refused: 0 });
      expect(info.connections!.limit).toBeGreaterThan(2);
      expect(info.connections!.open).toBeGreaterThanOrEqual(1); // this /info request's own
      for (const [i, result] of together.entries()) {
        const alone = await engine.complete(request(i));
        expect(result.choices[0]!.tokenIds).toEqual(alone.choices[0]!.tokenIds);
      }
    } finally {
      await engine.close();
    }
  });
});

describe("Engine process", () => {
  it("fails to start with the engine's own explanation", async () => {
    const err = await Engine.start({ checkpoint: "/nonexistent/ckpt" }, quiet).catch((e: Error) => e);
    expect(err).toBeInstanceOf(Error);
    expect((err as Error).message).toMatch(/exited before it was ready.*code 1.*no checkpoint manifest/s);
  });

  it("starts before it is opened: openModel takes a launch over, cancel stops one nobody opened", async () => {
    expect(launchModel("http://127.0.0.1:1/v1")).toBeUndefined();
    const launched = launchModel("engine:micro", { engine: quiet })!;
    // Another spec than the launch's is refused before anything is taken over.
    await expect(openModel("engine:tiny", { launched })).rejects.toThrow(/not the engine launched/);
    const engine = (await openModel("engine:micro", { launched })) as Engine;
    expect((await engine.complete({ prompt: "<think>", maxTokens: 2 })).choices).toHaveLength(1);
    await launched.cancel(); // taken over: its engine stops it, not the launch
    expect(engine.crashReason).toBeNull();
    expect((await engine.complete({ prompt: "<think>", maxTokens: 2 })).choices).toHaveLength(1);
    await expect(Engine.open(launched)).rejects.toThrow(/already opened/);
    await engine.close();

    // Cancelled while it starts: killed then, not waited for until it listens.
    const logs: string[] = [];
    const spare = EngineLaunch.start({ preset: "micro" }, { ...quiet, onLog: (l) => logs.push(l) });
    while ((await engineChildren()).length === 0) await new Promise((resolve) => setTimeout(resolve, 20));
    await spare.cancel();
    expect(await engineChildren()).toEqual([]);
    expect(logs.join("\n")).not.toMatch(/listening/); // python was still importing torch
    await expect(Engine.open(spare)).rejects.toThrow(/already opened/);
    // A launch that fails, never opened, rejects nothing unhandled; cancelling it is quiet.
    await EngineLaunch.start({ checkpoint: "/nonexistent/ckpt" }, quiet).cancel();
  });

  it("dies loudly, is not restarted, and a kill during a save leaves the previous checkpoint loadable", async () => {
    const dir = await mkdtemp(path.join(os.tmpdir(), "coa-engine-kill-"));
    const logs: string[] = [];
    try {
      const engine = await Engine.start({ preset: "micro" }, { ...quiet, onLog: (l) => logs.push(l) });
      // dtype auto: the engine timed both arithmetics before choosing one.
      expect(Object.keys((await engine.info()).matmul_gflops).sort()).toEqual(["bf16", "fp32"]);
      const first = await engine.saveCheckpoint(dir);
      await engine.trainSft({ batch: [sftExample(new ByteTokenizer(), "x", "y")] });
      const saving = engine.saveCheckpoint(dir).catch((e: Error) => e);
      process.kill(engine.pid!, "SIGKILL");
      const outcome = await saving;
      const err = await engine.complete({ prompt: "x", maxTokens: 1 }).catch((e: Error) => e);
      expect(err).toBeInstanceOf(Error);
      expect((err as Error).message).toMatch(/engine is not running.*SIGKILL/s);

      const again = await Engine.start({ checkpoint: dir }, quiet);
      const info = await again.info();
      // Either the kill beat the save (previous step) or the save completed first (new step).
      expect(outcome instanceof Error ? [first.step, first.step + 1] : [first.step + 1]).toContain(info.step);
      expect((await again.complete({ prompt: "<think>", maxTokens: 4 })).choices).toHaveLength(1);
      await again.close();
      await again.close();
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});
