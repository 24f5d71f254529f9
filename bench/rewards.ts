// Loader and scorer costs on the real benchmark files: load time per file, EM/F1 and math
// equivalence throughput, and the sandboxed code reward's time per test.
import { existsSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { codeReward, mathEquivalent, qaScores } from "../src/rewards/index.js";
import { loadTasks } from "../src/tasks/index.js";

const BENCHMARKS = fileURLToPath(new URL("../../shared/benchmarks/", import.meta.url));
const FILES = [
  "math500.parquet",
  "aime24.parquet",
  "aime25.parquet",
  "livecodebench_v5.parquet",
  "nq_full.jsonl",
  "webwalker_main.json",
];

/** Milliseconds of the best of `rounds` calls. */
async function best(rounds: number, fn: () => Promise<unknown> | unknown): Promise<number> {
  let fastest = Number.POSITIVE_INFINITY;
  for (let r = 0; r < rounds; r++) {
    const t0 = performance.now();
    await fn();
    fastest = Math.min(fastest, performance.now() - t0);
  }
  return fastest;
}

export async function run(): Promise<void> {
  if (!existsSync(BENCHMARKS)) return console.log(`skipped: ${BENCHMARKS} not found`);
  for (const file of FILES) {
    const ms = await best(3, () => loadTasks(`${BENCHMARKS}${file}`));
    const { tasks } = await loadTasks(`${BENCHMARKS}${file}`);
    console.log(`load ${file}: ${tasks.length} tasks in ${ms.toFixed(1)} ms (best of 3)`);
  }

  const nq = (await loadTasks(`${BENCHMARKS}nq_full.jsonl`)).tasks;
  // Score every question's first gold against all its golds: the same work an eval of 3610 answers does.
  const emMs = await best(5, () => nq.map((t) => qaScores(t.answers[0]!, t.answers)));
  console.log(`EM+F1: ${((nq.length / emMs) * 1000).toFixed(0)} predictions/s (nq_full, ${nq.length} rows)`);

  const math = (await loadTasks(`${BENCHMARKS}math500.parquet`)).tasks;
  const mathMs = await best(5, () =>
    math.map((t) => mathEquivalent(`\\boxed{${t.answers[0]}}`, t.answers[0]!)),
  );
  console.log(
    `math equivalence: ${((math.length / mathMs) * 1000).toFixed(0)} predictions/s (math500 golds)`,
  );

  const lcb = (await loadTasks(`${BENCHMARKS}livecodebench_v5.parquet`)).tasks;
  const task = lcb.find((t) => t.id === "livecodebench-abc374_a")!;
  const program = '```python\ns = input().strip()\nprint("Yes" if s.endswith("san") else "No")\n```';
  await codeReward(task, program); // warm-up: the sandbox probe runs once
  const tests = (task.meta.tests as unknown[]).length;
  const codeMs = await best(5, () => codeReward(task, program));
  console.log(`code reward: ${(codeMs / tests).toFixed(0)} ms per sandboxed test (abc374_a, ${tests} tests)`);
}
