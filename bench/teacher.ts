// Teacher: the expert driver (the offline stand-in for a strong LLM team) on a generated small world's
// dev split, through the real tools: success, recovery rates, tool calls, tokens and time per task.

import { rm } from "node:fs/promises";
import { ExpertDriver, formatSummary, runEpisode, summarizeTraces } from "../src/teacher/index.js";
import { worldFixture } from "../src/teacher/testing.js";

export async function run(): Promise<void> {
  const started = performance.now();
  const fx = await worldFixture("small", 1);
  console.log(`world small (seed 1): generated and indexed in ${Math.round(performance.now() - started)} ms`);
  const dev = fx.world.splits.dev;
  const driver = new ExpertDriver();
  const traces = [];
  const t0 = performance.now();
  for (const task of dev) traces.push(await runEpisode(task, driver, fx.tools));
  const seconds = (performance.now() - t0) / 1000;
  const s = summarizeTraces(traces);
  console.log(
    `expert on dev: ${dev.length} tasks in ${seconds.toFixed(1)} s (${(dev.length / seconds).toFixed(1)} tasks/s, one at a time)`,
  );
  console.log(formatSummary(s));
  console.log(
    `mean tokens per task (coa-byte-v1, all agent calls): ${s.meanTokensIn + s.meanTokensOut} (${s.meanTokensIn} read, ${s.meanTokensOut} written)`,
  );
  await rm(fx.dir, { recursive: true, force: true });
}
