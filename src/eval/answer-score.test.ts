import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { ScriptedModel } from "../model/testing/index.js";
import type { RunOptions } from "../runtime/index.js";
import type { Task } from "../tasks/index.js";
import { scoreDialectAnswer } from "./answer-score.js";
import { evaluate } from "./run.js";

const task = (answers: string[], kind: Task["kind"] = "multihop"): Task => ({
  id: "t",
  question: "Who founded Corvel?",
  answers,
  kind,
  source: "test",
  meta: {},
});

const verdict = async (answers: string[], prediction: string | null, dialect?: "coa" | "afm-mhqa") =>
  (await scoreDialectAnswer(task(answers), prediction, dialect)).correct;

describe("scoreDialectAnswer: several answers joined by the dialect's separator", () => {
  it("a task with several gold answers: each is accepted alone, and a list of them is right in any order", async () => {
    const golds = ["Ann Lee", "Ben Ode"];
    expect(await verdict(golds, "Ann Lee", "afm-mhqa")).toBe(true);
    expect(await verdict(golds, "Ann Lee | Ben Ode", "afm-mhqa")).toBe(true);
    expect(await verdict(golds, "Ben Ode|Ann Lee", "afm-mhqa")).toBe(true);
    // A gold written A|B is two alternatives too.
    expect(await verdict(["Ann Lee|Ben Ode"], "Ben Ode|ann lee.", "afm-mhqa")).toBe(true);
  });

  it("an answer listing several: right only when every part is (a hedge fails)", async () => {
    expect(await verdict(["Ann Lee"], "Ann Lee|Cy Pell", "afm-mhqa")).toBe(false);
    expect(await verdict(["Ann Lee"], "Ann Lee | the Ann Lee", "afm-mhqa")).toBe(true);
    const score = await scoreDialectAnswer(
      task(["Ann Lee", "Ben Ode"]),
      "Ann Lee|Cy Pell|Ben Ode",
      "afm-mhqa",
    );
    expect(score).toMatchObject({
      correct: false,
      score: 0,
      scorer: "em+parts",
      metrics: { parts: 3, partsCorrect: 2 },
    });
  });

  it("a name holding the separator still matches whole; empty parts are dropped", async () => {
    expect(await verdict(["AC/DC"], "AC|DC", "afm-mhqa")).toBe(true);
    expect(await verdict(["Ann Lee"], "Ann Lee||", "afm-mhqa")).toBe(true);
  });

  it("coa has no separator: the list is one answer, scored as written", async () => {
    expect(await verdict(["Ann Lee", "Ben Ode"], "Ann Lee|Ben Ode", "coa")).toBe(false);
    expect(await verdict(["Ann Lee", "Ben Ode"], "Ann Lee|Ben Ode")).toBe(false);
    expect(await verdict(["Ann Lee"], null, "afm-mhqa")).toBe(false);
  });

  it("each part gets the task's own scorer: numbers compare as numbers", async () => {
    const score = await scoreDialectAnswer(task(["1,200", "7"], "arithmetic"), "1200.0 | 7.0", "afm-mhqa");
    expect(score).toMatchObject({ correct: true, scorer: "em+numeric+parts" });
  });
});

describe("evaluate under afm-mhqa", () => {
  it("scores an episode's |-joined answer by the dialect the run was given", async () => {
    const model = () =>
      new ScriptedModel(
        () =>
          "<think>Both are named.</think>\n<reflection>Two founders.</reflection>\n<answer>Ben Ode|Ann Lee</answer>",
      );
    const run = async (prompt: Pick<RunOptions, "dialect">) => {
      const outDir = await mkdtemp(path.join(tmpdir(), "coa-mhqa-eval-"));
      try {
        return await evaluate({
          model: model(),
          tools: new Map(),
          tasks: [task(["Ann Lee", "Ben Ode"])],
          profile: "mhqa",
          k: 1,
          outDir,
          prompt,
        });
      } finally {
        await rm(outDir, { recursive: true, force: true });
      }
    };
    expect((await run({ dialect: "afm-mhqa" })).success.pass1).toBe(1);
    // The same words under coa's rules are one answer that matches no gold.
    expect((await run({ dialect: "coa" })).success.pass1).toBe(0);
  });
});
