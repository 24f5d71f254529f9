// `coa distill` on a generated teach run: 2,000 hand-shaped MAS traces (every message kind) through
// the whole funnel and every export, plus near-duplicate search alone on 10,000 questions.
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { DistillConfig, EXPORT_FORMATS, findNearDuplicates, runDistill } from "../src/distill/index.js";
import { fullTrace, shortTrace } from "../src/distill/testing/fixtures.js";

const TRACES = 2_000;
const QUESTIONS = 10_000;

const question = (i: number) =>
  `In which city was the founder of organization ${i} born, given it moved ${i % 13} times since ${1900 + (i % 97)}?`;

export async function run(): Promise<void> {
  const dir = await mkdtemp(path.join(tmpdir(), "coa-bench-distill-"));
  try {
    const lines = Array.from({ length: TRACES }, (_, i) => {
      const over = { taskId: `task-${i}`, question: question(i) };
      return JSON.stringify(i % 2 ? fullTrace(over) : shortTrace(over, over.question));
    });
    await writeFile(path.join(dir, "traces.jsonl"), `${lines.join("\n")}\n`);
    const t0 = performance.now();
    const result = await runDistill({
      traces: dir,
      out: path.join(dir, "data"),
      formats: EXPORT_FORMATS,
      config: DistillConfig.parse({}),
    });
    const s = (performance.now() - t0) / 1000;
    console.log(
      `distill ${TRACES} traces, all formats: ${s.toFixed(2)} s (${Math.round(TRACES / s)} traces/s), ${result.kept.length} kept`,
    );

    const questions = Array.from({ length: QUESTIONS }, (_, i) => question(i));
    const t1 = performance.now();
    const dups = findNearDuplicates(questions, DistillConfig.parse({}).dedup);
    const ms = performance.now() - t1;
    console.log(
      `near-duplicate search, ${QUESTIONS} templated questions: ${(ms / 1000).toFixed(2)} s, ${dups.filter(Boolean).length} flagged`,
    );
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}
