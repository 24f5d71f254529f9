import { mkdtemp, readFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { expect, it } from "vitest";
import { writeWorldSet } from "../../tasks/index.js";
import { worldFixture } from "../../teacher/testing.js";
import { TeachFlags, teach } from "./teach.js";

it("coa teach runs the expert on a world split, finds the corpus, writes config, traces and summary", async () => {
  const { dir } = await worldFixture("tiny", 2);
  const out = path.join(dir, "teach");
  const flags = TeachFlags.parse({
    tasks: dir,
    split: "dev",
    driver: "expert",
    api: "completions",
    out,
    limit: "3",
    concurrency: "2",
    seed: "0",
    searchTool: "web_search",
  });
  const log: string[] = [];
  const result = await teach(flags, (line) => log.push(line));
  expect(result.summary.traces).toBe(3);
  expect(log[0]).toMatch(/^teach: \d+ tasks from .*dev\.jsonl · driver expert \(expert-v1\)/);
  expect(log.at(-1)).toMatch(/^traces 3 \(errors 0\); success [\d.]+%/);
  const config = JSON.parse(await readFile(path.join(out, "config.json"), "utf8"));
  expect(config.corpus).toBe(path.join(dir, "corpus.jsonl"));
  expect(TeachFlags.safeParse({ ...flags, driver: "llm", model: undefined }).success).toBe(false);
});

it("coa teach on a world set draws evenly from every world and searches each task's own corpus", async () => {
  const dir = await mkdtemp(path.join(os.tmpdir(), "coa-teach-set-"));
  await writeWorldSet(dir, [3, 4], { size: "tiny", maxHops: 2 });
  const out = path.join(dir, "teach");
  const flags = TeachFlags.parse({
    tasks: dir,
    split: "train",
    driver: "expert",
    api: "completions",
    out,
    limit: "6",
    concurrency: "2",
    seed: "0",
    searchTool: "web_search",
  });
  const result = await teach(flags, () => {});
  expect(result.summary.traces).toBe(6);
  const traces = (await readFile(path.join(out, "traces.jsonl"), "utf8"))
    .trim()
    .split("\n")
    .map((l) => JSON.parse(l));
  expect(traces.filter((t) => t.taskId.startsWith("w3-"))).toHaveLength(3);
  expect(traces.filter((t) => t.taskId.startsWith("w4-"))).toHaveLength(3);
  // The expert solves a task only when its own world's articles come back from search.
  expect(traces.filter((t) => t.reward >= 1).length).toBeGreaterThanOrEqual(5);
  await expect(teach({ ...flags, corpus: "x.jsonl" }, () => {})).rejects.toThrow("each world's own corpus");
});
