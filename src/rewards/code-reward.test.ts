import { existsSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { beforeAll, describe, expect, it } from "vitest";
import { loadTasks, type Task } from "../tasks/index.js";
import { runPython } from "../tools/index.js";
import { codeReward, programOf, type Sandbox } from "./code-reward.js";

const BENCHMARKS = fileURLToPath(new URL("../../../shared/benchmarks/", import.meta.url));
const present = existsSync(BENCHMARKS);
if (!present) console.warn(`code reward tests on LiveCodeBench skipped: ${BENCHMARKS} not found`);

const fenced = (code: string) => `\`\`\`python\n${code}\n\`\`\``;

/** Our own solutions to three easy LiveCodeBench v5 problems, and plausible wrong ones. */
const PROGRAMS: Record<string, { right: string; wrong: string }> = {
  // S ends with "san" → Yes
  "livecodebench-abc374_a": {
    right: 's = input().strip()\nprint("Yes" if s.endswith("san") else "No")',
    wrong: 'input()\nprint("Yes")',
  },
  // first position where S and T differ, 0 if equal
  "livecodebench-abc374_b": {
    right: [
      "s = input().strip()",
      "t = input().strip()",
      "if s == t:",
      "    print(0)",
      "else:",
      "    i = 0",
      "    while i < min(len(s), len(t)) and s[i] == t[i]:",
      "        i += 1",
      "    print(i + 1)",
    ].join("\n"),
    // forgets the case where one string is a prefix of the other
    wrong: "s, t = input(), input()\nprint(next((i + 1 for i, (a, b) in enumerate(zip(s, t)) if a != b), 0))",
  },
  // count "#.#" windows; the trailing spaces are allowed by the comparison
  "livecodebench-abc375_a": {
    right:
      'n = int(input())\ns = input()\nprint(sum(s[i:i + 3] == "#.#" for i in range(n - 2)), end="  \\n")',
    wrong: 'n = int(input())\ns = input()\nprint(sum(s[i:i + 3] == "#.#" for i in range(n - 3)))',
  },
  // LeetCode style: checked by the row's assert snippet; `List` comes from the typing prelude
  "livecodebench-3610": {
    right: [
      "class Solution:",
      "    def findXSum(self, nums: List[int], k: int, x: int) -> List[int]:",
      "        out = []",
      "        for i in range(len(nums) - k + 1):",
      "            count = Counter(nums[i:i + k])",
      "            top = sorted(count.items(), key=lambda vc: (vc[1], vc[0]), reverse=True)[:x]",
      "            out.append(sum(v * c for v, c in top))",
      "        return out",
    ].join("\n"),
    // one window short; (the row's single assert has k == x, so it cannot catch a wrong top-x choice)
    wrong: [
      "class Solution:",
      "    def findXSum(self, nums: List[int], k: int, x: int) -> List[int]:",
      "        return [sum(nums[i:i + k]) for i in range(len(nums) - k)]",
    ].join("\n"),
  },
};

describe.skipIf(!present)("code reward on livecodebench_v5 rows, in the real sandbox", () => {
  let tasks: Map<string, Task>;
  beforeAll(async () => {
    const loaded = await loadTasks(`${BENCHMARKS}livecodebench_v5.parquet`);
    tasks = new Map(loaded.tasks.map((t) => [t.id, t]));
  });

  it.each(Object.keys(PROGRAMS))("%s: our solution passes every test", async (id) => {
    const task = tasks.get(id)!;
    const score = await codeReward(task, `<answer>\n${fenced(PROGRAMS[id]!.right)}\n</answer>`);
    const tests = (task.meta.tests as unknown[]).length + (task.meta.functional ? 1 : 0);
    expect(score).toEqual({
      score: 1,
      correct: true,
      error: null,
      scorer: "code",
      metrics: { passed: tests, tests },
    });
  });

  it.each(Object.keys(PROGRAMS))("%s: the wrong program fails", async (id) => {
    const score = await codeReward(tasks.get(id)!, fenced(PROGRAMS[id]!.wrong));
    expect(score).toMatchObject({ score: 0, correct: false, error: null, scorer: "code" });
  });

  it("a crashing program and a program that runs out of time score 0, not an error", async () => {
    const task = tasks.get("livecodebench-abc374_a")!;
    expect(await codeReward(task, fenced("raise SystemExit(input()[0])"))).toMatchObject({
      score: 0,
      error: null,
    });
    const quick: Sandbox = (run) => runPython({ ...run, limits: { wallMs: 1500, cpuSeconds: 1 } });
    const looping = await codeReward(task, fenced("while True:\n    pass"), quick);
    expect(looping).toMatchObject({ score: 0, error: null, metrics: { passed: 0 } });
  });
});

describe("program extraction", () => {
  it("takes the fenced python block of an answer, else the whole text", () => {
    expect(programOf("Here:\n```py\nprint(1)\n```\nDone.")).toBe("print(1)");
    expect(programOf("  print(2)\n")).toBe("print(2)");
  });
});
