import { extractCode } from "../protocol/index.js";
import type { CodeTest, Task } from "../tasks/index.js";
import { type PythonRun, type RunPythonRequest, runPython } from "../tools/index.js";
import { outputsMatch } from "./code-output.js";
import { type Score, scored, scoreError } from "./score.js";

/**
 * What the code reward needs from a sandbox: the tools' `runPython` by default. It must reject when
 * the sandbox itself cannot run, so that a missing sandbox is never read as a failing program.
 */
export type Sandbox = (
  run: Pick<RunPythonRequest, "code" | "stdin" | "signal">,
) => Promise<Pick<PythonRun, "exitCode" | "stdout" | "stderr"> & Partial<Pick<PythonRun, "killedBy">>>;
type SandboxOutcome = Awaited<ReturnType<Sandbox>>;

/**
 * LeetCode-style tasks are checked by assert snippets that call `Solution().method(...)`; these
 * imports are what such solutions commonly assume to be present.
 */
const FUNCTIONAL_PRELUDE = [
  "from typing import *",
  "from collections import *",
  "from functools import *",
  "from itertools import *",
  "from heapq import *",
  "from bisect import *",
  "from math import *",
  "import sys",
  "sys.setrecursionlimit(100000)",
  "",
].join("\n");

/** The program in a model's final answer: its fenced python block, else the whole text. */
export function programOf(prediction: string): string {
  return extractCode(prediction)?.code ?? prediction.trim();
}

type Check = { code: string; stdin?: string; passes: (out: SandboxOutcome) => boolean };

function checksOf(task: Task, program: string): Check[] {
  const tests = (task.meta.tests ?? []) as CodeTest[];
  const checks: Check[] = tests.map((t) => ({
    code: program,
    stdin: t.input,
    passes: (out) => out.exitCode === 0 && outputsMatch(out.stdout, t.output),
  }));
  if (typeof task.meta.functional === "string") {
    const code = `${FUNCTIONAL_PRELUDE}${program}\n\n${task.meta.functional}`;
    checks.push({ code, passes: (out) => out.exitCode === 0 });
  }
  return checks;
}

/**
 * Runs a candidate program against a code task's tests in the sandbox: stdin/expected-output pairs
 * compared as LiveCodeBench does, and for LeetCode-style tasks the assert snippet. All pass = 1.
 * Stops at the first failing test. A sandbox failure, an aborted run or a task without tests is an
 * error, not a 0.
 */
export async function codeReward(
  task: Task,
  prediction: string,
  sandbox: Sandbox = runPython,
  signal?: AbortSignal,
): Promise<Score> {
  const checks = checksOf(task, programOf(prediction));
  if (checks.length === 0) return scoreError("code", `task ${task.id} has no tests`);
  let passed = 0;
  for (const check of checks) {
    let out: SandboxOutcome;
    try {
      out = await sandbox({ code: check.code, stdin: check.stdin, signal });
    } catch (err) {
      return scoreError("code", `sandbox failed: ${(err as Error).message}`);
    }
    if (out.killedBy === "aborted") return scoreError("code", "code run aborted");
    if (!check.passes(out)) break;
    passed++;
  }
  return scored("code", passed === checks.length, { passed, tests: checks.length });
}
