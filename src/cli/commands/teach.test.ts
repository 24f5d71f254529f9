import { readFile } from "node:fs/promises";
import path from "node:path";
import { expect, it } from "vitest";
import { worldFixture } from "../../teacher/index.js";
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
