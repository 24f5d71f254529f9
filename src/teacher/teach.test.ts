import { appendFile, readFile } from "node:fs/promises";
import path from "node:path";
import { beforeAll, expect, it } from "vitest";
import { ExpertDriver } from "./expert/expert.js";
import { runTeach } from "./teach.js";
import { type WorldFixture, worldFixture } from "./testing.js";
import { MasTrace } from "./trace.js";

let fx: WorldFixture;
beforeAll(async () => {
  fx = await worldFixture("tiny");
});

const lines = async (file: string) => (await readFile(file, "utf8")).split("\n").filter(Boolean);

it("appends one trace per task, resumes after a kill, repairs a torn line and reruns broken episodes", async () => {
  const out = path.join(fx.dir, "teach");
  const tasks = fx.world.splits.train;
  const driver = new ExpertDriver();
  const seen: number[] = [];

  const first = await runTeach({ tasks, driver, tools: fx.tools, out, limit: 6, concurrency: 2 });
  expect(first.resumed).toBe(0);
  expect(await lines(first.tracesFile)).toHaveLength(6);

  // A killed run leaves a torn last line; a broken episode (model down) is recorded with an error.
  const broken = {
    ...MasTrace.parse(JSON.parse((await lines(first.tracesFile))[0])),
    error: "model down",
    reward: null,
  };
  await appendFile(first.tracesFile, `${JSON.stringify(broken)}\n{"version":1,"taskId":"w1-mul`);

  const second = await runTeach({
    tasks,
    driver,
    tools: fx.tools,
    out,
    limit: 9,
    onProgress: (p) => seen.push(p.done),
  });
  expect(second.repaired).toBe(true);
  expect(second.resumed).toBe(5);
  expect(seen[0]).toBe(5);
  expect(seen.at(-1)).toBe(9);
  const records = (await lines(second.tracesFile)).map((l) => MasTrace.parse(JSON.parse(l)));
  expect(records).toHaveLength(6 + 1 + 4);
  expect(new Set(records.map((r) => r.taskId)).size).toBe(9);
  expect(second.summary.traces).toBe(9);
  expect(second.summary.errors).toBe(0);
  expect(JSON.parse(await readFile(path.join(out, "summary.json"), "utf8"))).toEqual(second.summary);
  expect(await readFile(path.join(out, "report.md"), "utf8")).toMatch(
    /^# Teach run\n\nDriver `expert` \(expert-v1\)/,
  );
});
