import { mkdtemp, readFile, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Engine, readTokenizerFile, type Tokenizer } from "../../model/index.js";
import type { StepMetrics } from "../step-loop.js";
import type { PretrainConfigInput } from "./config.js";
import { type PretrainCorpus, pretrainCorpus } from "./corpus.js";
import { pretrainTokenizer } from "./tokenizer.js";
import { runPretrain } from "./trainer.js";

// fp32: the resumed run is compared with the uninterrupted one to the last digits.
const quiet = { onLog: () => {}, threads: 1, dtype: "fp32" as const };

let dir: string;
let corpus: PretrainCorpus;
let tok: Tokenizer;
let tokFile: string;
const engines: Engine[] = [];
const start = async (source: Parameters<typeof Engine.start>[0]) => {
  const e = await Engine.start(source, { ...quiet, tokenizer: tokFile });
  engines.push(e);
  return e;
};

const config = (out: string): PretrainConfigInput => ({
  out: path.join(dir, out),
  seeds: [11, 12, 13],
  size: "tiny",
  maxHops: 2,
  tokenizer: "bpe:512",
  steps: 24,
  lr: 1e-2,
  warmupRatio: 0.1,
  batchTokens: 1024,
  maxLength: 128,
  evalEvery: 12,
  evalTokens: 1024,
  copyExamples: 16,
  checkpointEvery: 8,
});

beforeAll(async () => {
  dir = await mkdtemp(path.join(os.tmpdir(), "coa-pretrain-"));
  corpus = pretrainCorpus({
    worlds: { train: [11, 12], eval: 13 },
    size: "tiny",
    maxHops: 2,
    mix: { articles: 1, pages: 1, lookup: 1, chain: 1, facts: 1 },
    seed: 0,
  });
  tok = await pretrainTokenizer("bpe:512", corpus);
  tokFile = path.join(dir, "tokenizer.json");
  await writeFile(tokFile, JSON.stringify(tok));
});
afterAll(async () => {
  for (const e of engines) await e.close();
});

describe("pretraining on the engine", () => {
  const full: StepMetrics[] = [];

  it("lowers the loss on held-out text of an unseen world, and writes a base that SFT can start from", async () => {
    const engine = await start({ preset: "micro" });
    const summary = await runPretrain(
      config("full"),
      engine,
      { tokenizer: tok, corpus },
      {
        onStep: (m) => full.push(m),
      },
    );
    const run = path.join(dir, "full");
    expect(summary.steps).toBe(24);
    // A fresh model guesses uniformly, ln(512) ≈ 6.2 nats; 24 steps of 1,024 tokens take off well over one.
    expect(full[0].loss).toBeGreaterThan(Math.log(512) - 0.3);
    expect(full[23].loss).toBeLessThan(full[0].loss - 1);
    expect(summary.evalLoss).toBeLessThan(full[0].loss - 1);
    expect(summary.copyLoss).toBeLessThan(Math.log(512) - 0.5);
    const data = JSON.parse(await readFile(path.join(run, "data.json"), "utf8"));
    expect(data.worlds).toEqual({ train: [11, 12], eval: 13 });
    expect(data.fertility.heldOut.tokensPerName).toBeGreaterThan(1);
    expect(Object.keys(data.documents)).toEqual(["articles", "pages", "lookup", "chain", "facts"]);
    expect(await readFile(path.join(run, "report.md"), "utf8")).toContain("![loss](loss.svg)");
    // The base's vocabulary is written beside it, for `coa distill --tokenizer`.
    expect((await readTokenizerFile(path.join(run, "tokenizer.json"))).name).toBe(tok.name);
    const base = await start({ checkpoint: path.join(run, "last") });
    expect(base.tokenizer).toBe(tok.name);
  }, 60_000);

  it("continues after a kill with the same steps, none lost or repeated", async () => {
    const killed = new AbortController();
    await expect(
      runPretrain(
        config("killed"),
        await start({ preset: "micro" }),
        { tokenizer: tok, corpus },
        {
          signal: killed.signal,
          onStep: (m) => m.step === 13 && killed.abort(new Error("killed")),
        },
      ),
    ).rejects.toThrow("killed");

    const resumed: StepMetrics[] = [];
    const fresh = await start({ checkpoint: path.join(dir, "killed", "last") });
    const summary = await runPretrain(
      config("killed"),
      fresh,
      { tokenizer: tok, corpus },
      {
        onStep: (m) => resumed.push(m),
      },
    );
    expect(summary.resumedFromStep).toBe(8);
    expect(resumed.map((m) => m.step)).toEqual(Array.from({ length: 16 }, (_, i) => 8 + i));
    for (const m of resumed) {
      expect(m.lr).toBe(full[m.step].lr);
      expect(m.loss).toBeCloseTo(full[m.step].loss, 5);
    }
    expect(summary.evalLoss).toBeCloseTo(full[23].eval_loss!, 5);
    const logged = (await readFile(path.join(dir, "killed", "metrics.jsonl"), "utf8")).trim().split("\n");
    expect(logged.map((l) => JSON.parse(l).step)).toEqual([...Array(24).keys()]);
  }, 60_000);
});
