import { existsSync, readdirSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import type { CodeTest } from "../task.js";
import { loadTasks } from "./load-tasks.js";

// The shared benchmark files sit beside the repository root; they are never copied into the repo.
const BENCHMARKS = fileURLToPath(new URL("../../../../shared/benchmarks/", import.meta.url));
const present = existsSync(BENCHMARKS);
if (!present) console.warn(`benchmark loader tests skipped: ${BENCHMARKS} not found`);

const load = (name: string) => loadTasks(`${BENCHMARKS}${name}`);
const countBy = (values: string[]) =>
  Object.fromEntries([...new Set(values)].map((v) => [v, values.filter((x) => x === v).length]));

describe.skipIf(!present)("loaders on the real benchmark files", () => {
  const tested = [
    "aime24.parquet",
    "aime25.parquet",
    "livecodebench_v5.parquet",
    "math500.parquet",
    "nq_full.jsonl",
    "webwalker_main.json",
  ];

  it("has a test for every file in the benchmarks folder", () => {
    expect(readdirSync(BENCHMARKS).sort()).toEqual(tested);
  });

  it("math500.parquet: 500 math tasks, question cut out of the AFM prompt", async () => {
    const { format, tasks, skipped } = await load("math500.parquet");
    expect(format).toBe("verl-parquet");
    expect(tasks).toHaveLength(500);
    expect(skipped).toEqual([]);
    expect(new Set(tasks.map((t) => t.kind))).toEqual(new Set(["math"]));
    expect(tasks[0]).toMatchObject({
      id: "math500-0",
      source: "math500",
      question:
        "Convert the point $(0,3)$ in rectangular coordinates to polar coordinates.  Enter your answer in the form $(r,\\theta),$ where $r > 0$ and $0 \\le \\theta < 2 \\pi.$",
      answers: ["\\left( 3, \\frac{\\pi}{2} \\right)"],
      meta: { dataSource: "MATH500", ability: "fact-reasoning", index: "0", split: "train" },
    });
    expect(tasks[1]!.answers).toEqual(["p - q"]);
    // The tool instructions that precede "Task:" are not part of the question.
    expect(tasks.some((t) => t.question.includes("structured functions"))).toBe(false);
  });

  it("aime24.parquet: 30 tasks with zero-padded integer answers", async () => {
    const { tasks } = await load("aime24.parquet");
    expect(tasks).toHaveLength(30);
    expect(tasks[0]!.question).toMatch(/^Every morning Aya goes for a \$9\$-kilometer-long walk/);
    expect(tasks.map((t) => t.answers[0]).slice(0, 3)).toEqual(["204", "113", "371"]);
    expect(tasks[7]!.answers).toEqual(["025"]);
    expect(new Set(tasks.map((t) => t.source))).toEqual(new Set(["aime24"]));
  });

  it("aime25.parquet: 30 tasks", async () => {
    const { tasks } = await load("aime25.parquet");
    expect(tasks).toHaveLength(30);
    expect(tasks[0]).toMatchObject({
      id: "aime25-0",
      kind: "math",
      source: "aime25",
      question: "Find the sum of all integer bases $b>9$ for which $17_b$ is a divisor of $97_b.$",
      answers: ["70"],
    });
  });

  it("livecodebench_v5.parquet: 167 code tasks, stdin tests or LeetCode assert snippets", async () => {
    const { tasks } = await load("livecodebench_v5.parquet");
    expect(tasks).toHaveLength(167);
    expect(new Set(tasks.map((t) => t.kind))).toEqual(new Set(["code"]));
    expect(countBy(tasks.map((t) => String(t.meta.platform)))).toEqual({ atcoder: 105, leetcode: 62 });
    expect(tasks.filter((t) => typeof t.meta.functional === "string")).toHaveLength(62);

    const first = tasks[0]!;
    expect(first).toMatchObject({
      id: "livecodebench-abc374_c",
      source: "livecodebench",
      answers: [],
      meta: { platform: "atcoder", difficulty: "medium", question_title: "Separated Lunch" },
    });
    expect(first.meta.tests as CodeTest[]).toEqual([
      { input: "5\n2 3 5 10 12\n", output: "17\n" },
      { input: "2\n1 1\n", output: "1\n" },
      { input: "6\n22 25 26 45 22 31\n", output: "89\n" },
    ]);
    expect(first.question).toMatch(/^As KEYENCE headquarters have more and more workers/);
    expect(first.question).toMatch(/read the inputs from stdin to solve the problem/);
    expect(first.question).not.toMatch(/Answer format:|\r/);

    const leetcode = tasks.find((t) => t.id === "livecodebench-3610")!;
    expect(leetcode.meta.tests).toEqual([]);
    expect(leetcode.meta.functional).toContain("result = Solution().findXSum([3, 8, 7, 8, 7, 5], 2, 2)");
    expect(leetcode.question).toContain(
      "class Solution:\n    def findXSum(self, nums: List[int], k: int, x: int)",
    );
  });

  it("nq_full.jsonl: 3610 QA rows with every gold answer kept", async () => {
    const { format, tasks } = await load("nq_full.jsonl");
    expect(format).toBe("qa-jsonl");
    expect(tasks).toHaveLength(3610);
    expect(tasks[0]).toEqual({
      id: "nq-1",
      question: "who got the first nobel prize in physics",
      answers: ["Wilhelm Conrad Röntgen"],
      kind: "qa",
      source: "nq",
      meta: { line: 1 },
    });
    expect(tasks[6]!.answers).toEqual(["Xiu Li Dai", "Dai Xiuli", "Dai Yongge", "Yongge Dai"]);
  });

  it("webwalker_main.json: 680 web QA rows, start URL and path info in meta", async () => {
    const { format, tasks } = await load("webwalker_main.json");
    expect(format).toBe("webwalker-json");
    expect(tasks).toHaveLength(680);
    expect(new Set(tasks.map((t) => t.kind))).toEqual(new Set(["web_qa"]));
    expect(tasks[1]).toMatchObject({
      id: "webwalker-1",
      source: "webwalker",
      question: "When and where was the ICSE duplicate submission statement agreed upon?",
      answers: ["November 2002, Charleston, South Carolina."],
      meta: {
        root_url: "http://www.icse-conferences.org/",
        info: { domain: "conference", type: "single_source", Level: "medium", lang: "en" },
      },
    });
    const info = tasks.map((t) => (t.meta.info as { type: string }).type);
    expect(countBy(info)).toEqual({ single_source: 340, multi_source: 340 });
  });

  it("limit stops early", async () => {
    const { tasks } = await loadTasks(`${BENCHMARKS}nq_full.jsonl`, { limit: 5 });
    expect(tasks.map((t) => t.id)).toEqual(["nq-1", "nq-2", "nq-3", "nq-4", "nq-5"]);
  });
});
