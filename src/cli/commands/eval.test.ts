import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Command } from "commander";
import { describe, expect, it } from "vitest";
import { costSummary, type EvalSummary, successMetrics } from "../../eval/index.js";
import { Engine, findPython } from "../../model/index.js";
import { engineChildren, FixtureServer } from "../../model/testing/index.js";
import { parseFlags } from "../flags.js";
import { EvalFlags, register } from "./eval.js";
import { defaultConcurrency, formatEvalSummary, runEval } from "./eval-run.js";

const sample = (correct: boolean) => ({ correct, error: null, selfScore: null });

describe("formatEvalSummary", () => {
  it("prints success per task kind and copy accuracy", () => {
    const summary: EvalSummary = {
      model: "m",
      profile: "all",
      success: successMetrics([
        { taskId: "a", samples: [sample(true)] },
        { taskId: "b", samples: [sample(false)] },
      ]),
      byKind: {
        comparison: successMetrics([{ taskId: "b", samples: [sample(false)] }]),
        multihop: successMetrics([{ taskId: "a", samples: [sample(true)] }]),
      },
      taskScores: { a: 1, b: 0 },
      copy: { entity: { episodes: 2, copied: 1, rate: 0.5 }, value: { episodes: 0, copied: 0, rate: null } },
      cost: costSummary([]),
      formatErrorRate: 0,
      finishReasons: { answer: 2 },
    };
    const text = formatEvalSummary(summary);
    expect(text).toContain(
      "by kind: comparison 0.0% of 1 (avg@k 0.0%) · multihop 100.0% of 1 (avg@k 100.0%)",
    );
    expect(text).toContain(
      "copy accuracy: the question's entity in the first tool call 50.0% (1 of 2) · the first lookup's value in the second –",
    );
  });
});

describe("coa eval --concurrency", () => {
  it("defaults to 32 episodes in flight on the embedded engine, which batches them, and 4 on a server", () => {
    expect(defaultConcurrency(Object.create(Engine.prototype))).toBe(32);
    expect(defaultConcurrency({ name: "http://127.0.0.1:8000/v1" })).toBe(4);
    const flags = {
      model: "engine:micro",
      tasks: "t.jsonl",
      out: "o",
      k: "1",
      profile: "all",
      temperature: "0",
      seed: "0",
    };
    expect(parseFlags(EvalFlags, flags).concurrency).toBeUndefined();
    expect(parseFlags(EvalFlags, { ...flags, concurrency: "8" }).concurrency).toBe(8);
  });
});

describe("coa eval --retries and --request-timeout (issue 22, item 6)", () => {
  it("opens the model with the flags: one attempt per --retries 0, each cut at --request-timeout", async () => {
    const dir = await mkdtemp(join(tmpdir(), "coa-eval-flags-"));
    const tasks = join(dir, "tasks.jsonl");
    await writeFile(tasks, `${JSON.stringify({ id: "t1", question: "q?", answer: "a" })}\n`);
    const fixture = await FixtureServer.start({ "GET /v1/models": () => ({ hang: true }) });
    try {
      const flags = parseFlags(EvalFlags, {
        model: `${fixture.url}/v1`,
        api: "completions",
        tasks,
        out: join(dir, "out"),
        k: "1",
        profile: "web",
        concurrency: "1",
        temperature: "0",
        seed: "0",
        requestTimeout: "0.2",
        retries: "0",
      });
      const started = performance.now();
      await expect(runEval(flags, () => {})).rejects.toThrow(/v1\/models: no answer within 200 ms$/);
      expect(performance.now() - started).toBeLessThan(1_500);
      expect(fixture.requests).toHaveLength(1);
    } finally {
      await fixture.close();
      await rm(dir, { recursive: true, force: true });
    }
  });
});

describe("coa eval's engine", () => {
  it("is stopped when the run fails before taking it over", async () => {
    // Python found already (it is remembered per process), so the engine spawns before the tasks are read.
    await findPython();
    const program = new Command().exitOverride();
    register(program);
    const missing = join(tmpdir(), "coa-eval-no-such-tasks.jsonl");
    const run = program.parseAsync([
      "node",
      "coa",
      "eval",
      "--model",
      "engine:micro",
      "--tasks",
      missing,
      "--out",
      tmpdir(),
    ]);
    await expect(run).rejects.toThrow(/coa-eval-no-such-tasks/);
    // The failed run killed it, rather than leave it to this process's exit.
    expect(await engineChildren()).toEqual([]);
  });
});
