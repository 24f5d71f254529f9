import { describe, expect, it } from "vitest";
import { ScriptedModel } from "../model/testing/index.js";
import type { Task } from "../tasks/index.js";
import { SandboxUnavailableError } from "../tools/index.js";
import type { Sandbox } from "./code-reward.js";
import { LlmJudge } from "./judge.js";
import { scoreTask } from "./score-task.js";

const task = (over: Partial<Task>): Task => ({
  id: "t",
  question: "q?",
  answers: [],
  kind: "qa",
  source: "test",
  meta: {},
  ...over,
});

/** A stand-in for the sandbox that answers from a table of stdout by stdin: it tests routing, not isolation. */
function tableSandbox(stdoutByStdin: Record<string, string>): Sandbox & { runs: number } {
  const run = async ({ stdin }: { stdin?: string }) => {
    run.runs++;
    return { exitCode: 0, stdout: stdoutByStdin[stdin ?? ""] ?? "", stderr: "" };
  };
  run.runs = 0;
  return run;
}

describe("scoreTask", () => {
  it("QA: exact match decides, F1 is recorded", async () => {
    const nq = task({ answers: ["Wilhelm Conrad Röntgen"] });
    expect(await scoreTask(nq, "Wilhelm Röntgen")).toEqual({
      score: 0,
      correct: false,
      error: null,
      scorer: "em",
      metrics: { em: 0, f1: 0.8 },
    });
    expect((await scoreTask(nq, "wilhelm conrad röntgen.")).correct).toBe(true);
  });

  it("world multihop uses EM; computed answers also match by number", async () => {
    expect((await scoreTask(task({ kind: "multihop", answers: ["Ada Vell"] }), "ada vell")).scorer).toBe(
      "em",
    );
    const arithmetic = task({ kind: "arithmetic", answers: ["12"] });
    expect(await scoreTask(arithmetic, "12.0")).toMatchObject({ score: 1, scorer: "em+numeric" });
    expect(await scoreTask(arithmetic, "13")).toMatchObject({ score: 0, scorer: "em" });
    expect((await scoreTask(task({ kind: "computation", answers: ["1234"] }), "1,234")).correct).toBe(true);
  });

  it("math: equivalence against any gold", async () => {
    const math = task({ kind: "math", answers: ["\\frac{14}{3}"] });
    expect(await scoreTask(math, "so \\boxed{14/3}")).toEqual({
      score: 1,
      correct: true,
      error: null,
      scorer: "math",
    });
    expect((await scoreTask(math, "\\boxed{4.67}")).correct).toBe(false);
  });

  it("no prediction is a wrong answer, not an error", async () => {
    expect(await scoreTask(task({ kind: "math", answers: ["1"] }), null)).toEqual({
      score: 0,
      correct: false,
      error: null,
      scorer: "math",
    });
  });

  it("web QA: EM without a judge, the judge's verdict with one", async () => {
    const web = task({ kind: "web_qa", question: "Who funded SUPPLY?", answers: ["The EU4Health program."] });
    expect((await scoreTask(web, "EU4Health")).scorer).toBe("em");
    const model = new ScriptedModel(['{"correct": true, "reason": "same program"}']);
    expect(await scoreTask(web, "EU4Health", { judge: model })).toEqual({
      score: 1,
      correct: true,
      error: null,
      scorer: "judge",
      metrics: { em: 0, f1: expect.closeTo(2 / 3, 9), cached: 0 },
    });
    // the judge made for this model is kept, so the same question is answered from its cache
    expect((await scoreTask(web, "EU4Health", { judge: model })).metrics?.cached).toBe(1);
  });

  it("web QA: a judge that is down gives an error, not a zero", async () => {
    const down = new ScriptedModel(() => {
      throw new Error("HTTP 503");
    });
    const judge = new LlmJudge({ model: down, retries: 0 });
    const web = task({ kind: "web_qa", answers: ["x"] });
    expect(await scoreTask(web, "x", { judge })).toEqual({
      score: 0,
      correct: false,
      error: "judge call failed: HTTP 503 (after 1 attempts)",
      scorer: "judge",
    });
  });

  it("code: all tests must pass; it stops at the first failure", async () => {
    const tests = [
      { input: "1\n", output: "2\n" },
      { input: "2\n", output: "4\n" },
      { input: "3\n", output: "6\n" },
    ];
    const code = task({ kind: "code", meta: { tests } });
    const right = tableSandbox({ "1\n": "2\n", "2\n": "4\n", "3\n": "6\n" });
    expect(await scoreTask(code, "```python\nprint(2*int(input()))\n```", { sandbox: right })).toEqual({
      score: 1,
      correct: true,
      error: null,
      scorer: "code",
      metrics: { passed: 3, tests: 3 },
    });
    const wrong = tableSandbox({ "1\n": "2\n", "2\n": "5\n", "3\n": "6\n" });
    expect((await scoreTask(code, "print(0)", { sandbox: wrong })).metrics).toEqual({ passed: 1, tests: 3 });
    expect(wrong.runs).toBe(2);
  });

  it("code: a sandbox failure or a task without tests is an error", async () => {
    const code = task({ kind: "code", meta: { tests: [{ input: "", output: "1\n" }] } });
    const refusing: Sandbox = async () => {
      throw new SandboxUnavailableError("Python sandbox unavailable: cannot run bwrap");
    };
    expect(await scoreTask(code, "print(1)", { sandbox: refusing })).toEqual({
      score: 0,
      correct: false,
      error: "sandbox failed: Python sandbox unavailable: cannot run bwrap",
      scorer: "code",
    });
    const aborted: Sandbox = async () => ({ exitCode: null, stdout: "", stderr: "", killedBy: "aborted" });
    expect((await scoreTask(code, "print(1)", { sandbox: aborted })).error).toBe("code run aborted");
    expect((await scoreTask(task({ id: "empty", kind: "code" }), "print(1)")).error).toBe(
      "task empty has no tests",
    );
  });
});
