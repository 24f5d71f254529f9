import { mkdtemp, readFile, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { z } from "zod";
import { ScriptedModel } from "../model/testing/index.js";
import { PROMPT_END } from "../protocol/index.js";
import type { Task } from "../tasks/index.js";
import type { Observation, Tool } from "../tools/index.js";
import { evaluate } from "./run.js";

const tasks: Task[] = [
  {
    id: "a",
    question: "What is the capital of Orla?",
    answers: ["Denmoor"],
    kind: "multihop",
    source: "test",
    meta: {},
  },
  {
    id: "b",
    question: "Who founded Corvel?",
    answers: ["Lio Tamsin"],
    kind: "multihop",
    source: "test",
    meta: {},
  },
];

/** A search tool over two fixed facts, so the scripted model's calls get real observations. */
const search: Tool<string> = {
  tag: "wiki_search",
  description: "fixed facts",
  argsSchema: z.string(),
  parseArgs: (raw) => raw.trim(),
  run: async (query): Promise<Observation> => ({
    text: query.includes("Orla")
      ? "1. Orla\n   Its capital is Denmoor."
      : "1. Corvel\n   Founded by Lio Tamsin.",
    ok: true,
    truncated: false,
    elapsedMs: 0,
  }),
};

/** Answers Orla right and Corvel wrong (it trusts the wrong name). */
function scripted() {
  return new ScriptedModel(({ prompt }) => {
    const orla = prompt.includes("Orla");
    const sofar = prompt.slice(prompt.indexOf(PROMPT_END));
    if (!sofar.includes("<observation>"))
      return `<plan>Look it up.</plan>\n<wiki_search>${orla ? "Orla capital" : "Corvel founder"}</wiki_search>`;
    const answer = orla ? "Denmoor" : "Ada Brand";
    return `<suggested_answer>${answer}</suggested_answer>\n<double_check>Matches the source. Score: ${orla ? 5 : 3}</double_check>\n<answer>${answer}</answer>`;
  });
}

/** Options for one sample of each task, in a fresh out folder. */
async function oneSampleRun() {
  const outDir = await mkdtemp(path.join(tmpdir(), "coa-eval-"));
  const opts = {
    tools: new Map([["wiki_search" as const, search]]),
    tasks,
    profile: "all" as const,
    k: 1,
    outDir,
  };
  return { opts, outDir };
}

describe("evaluate", () => {
  it("runs k samples per task through the runtime, scores them and accounts their cost", async () => {
    const outDir = await mkdtemp(path.join(tmpdir(), "coa-eval-"));
    const summary = await evaluate({
      model: scripted(),
      tools: new Map([["wiki_search" as const, search]]),
      tasks,
      profile: "all",
      k: 2,
      outDir,
    });
    expect(summary.success).toMatchObject({ tasks: 2, k: 2, pass1: 0.5, avgK: 0.5, passK: 0.5 });
    expect(summary.cost.episodes).toBe(4);
    expect(summary.cost.toolCallsPerTask).toBe(1);
    expect(summary.cost.billedTokensPerTask).toBeGreaterThan(summary.cost.generatedTokensPerTask);
    expect(summary.cost.billedTokensPerSolvedTask).toBeCloseTo(summary.cost.billedTokensPerTask * 2);
    expect(summary.finishReasons).toEqual({ answer: 4 });

    const lines = (await readFile(path.join(outDir, "trajectories.jsonl"), "utf8")).trim().split("\n");
    expect(lines).toHaveLength(4);
    // Episodes run concurrently and are written as they finish: find task a's rather than the first line.
    const first = lines.map((line) => JSON.parse(line)).find((t) => t.taskId === "a");
    expect(first.origin).toBe("eval");
    expect(first.version).toBe(2);
    expect(first.meta.eval).toMatchObject({ scorer: expect.any(String), error: null, answers: ["Denmoor"] });
    // Each key once, in its writer's namespace: the gold answers only in eval's verdict.
    expect(Object.keys(first.meta).sort()).toEqual(["eval", "runtime"]);
    expect(first.meta.runtime.calls).toHaveLength(2);
  });

  it("splits success by task kind, keeps each task's avg@k, and measures copying on world tasks", async () => {
    const lookup = (subject: string | { ref: number }, attr: string) => ({
      op: "lookup",
      subject,
      type: "city",
      attr,
    });
    const world: Task[] = [
      {
        ...tasks[0]!,
        // A chain: the second lookup is about the city the first one finds.
        meta: {
          supportingDocs: ["wiki/Orla", "wiki/Denmoor"],
          plan: { steps: [lookup("Orla", "capital"), lookup({ ref: 0 }, "population")] },
        },
      },
      {
        ...tasks[1]!,
        kind: "comparison",
        meta: {
          supportingDocs: ["wiki/Corvel", "wiki/Tamsin"],
          plan: { steps: [lookup("Corvel", "founded"), lookup("Tamsin", "founded")] },
        },
      },
    ];
    const summary = await evaluate({
      model: scripted(),
      tools: new Map([["wiki_search" as const, search]]),
      tasks: world,
      profile: "all",
      k: 2,
      outDir: await mkdtemp(path.join(tmpdir(), "coa-eval-")),
    });
    expect(summary.byKind.multihop).toMatchObject({ tasks: 1, pass1: 1, avgK: 1 });
    expect(summary.byKind.comparison).toMatchObject({ tasks: 1, pass1: 0, avgK: 0 });
    expect(summary.taskScores).toEqual({ a: 1, b: 0 });
    // Both first searches name the question's entity; no episode makes the second lookup.
    expect(summary.copy.entity).toEqual({ episodes: 4, copied: 4, rate: 1 });
    expect(summary.copy.value).toEqual({ episodes: 2, copied: 0, rate: 0 });
  });

  it("resumes: samples already on disk are not run again, and a torn last line is repaired", async () => {
    const { opts, outDir } = await oneSampleRun();
    await evaluate({ ...opts, model: scripted() });
    const file = path.join(outDir, "trajectories.jsonl");
    const [firstLine] = (await readFile(file, "utf8")).split("\n");
    await writeFile(file, `${firstLine}\n{"torn":`);

    const model = scripted();
    const summary = await evaluate({ ...opts, model });
    expect(model.calls).toBe(2); // one task re-run: two model turns
    expect(summary.cost.episodes).toBe(2);
    expect((await readFile(file, "utf8")).trim().split("\n")).toHaveLength(2);
  });

  it("resumes from a file written before v2: flat meta, answers beside the verdict", async () => {
    const { opts, outDir } = await oneSampleRun();
    const fresh = await evaluate({ ...opts, model: scripted() });
    const file = path.join(outDir, "trajectories.jsonl");
    // The same records in the v1 shape, as eval wrote them before: no version, the runtime's keys
    // and the verdict side by side in one flat meta, the gold answers twice.
    const v1 = (await readFile(file, "utf8"))
      .trim()
      .split("\n")
      .map((line) => {
        const { version, meta, ...rest } = JSON.parse(line);
        expect(version).toBe(2);
        return JSON.stringify({
          ...rest,
          meta: { ...meta.runtime, answers: meta.eval.answers, eval: meta.eval },
        });
      });
    expect(
      v1.every((l) => !l.includes('"version"') && l.includes('"answers"') && l.includes('"calls"')),
    ).toBe(true);
    await writeFile(file, `${v1.join("\n")}\n`);

    const model = scripted();
    const resumed = await evaluate({ ...opts, model });
    expect(model.calls).toBe(0); // every sample read back from the v1 file
    expect(resumed).toEqual(fresh);
  });
});
