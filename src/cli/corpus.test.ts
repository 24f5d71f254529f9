import { mkdtemp } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { expect, it } from "vitest";
import { writeWorldSet } from "../tasks/index.js";
import { requireCorpus, taskGround } from "./corpus.js";

it("taskGround gives each task of a world set its own world's tools, the worlds interleaved", async () => {
  const dir = await mkdtemp(path.join(os.tmpdir(), "coa-ground-"));
  await writeWorldSet(dir, [3, 4], { size: "tiny", maxHops: 2 });
  // The tools here are just the corpus each toolset was built over.
  const ground = await taskGround({ tasks: dir, split: "rl" }, (corpus) => corpus);
  const corpusOf = (seed: number) => path.join(dir, `world-${seed}`, "corpus.jsonl");
  expect(ground.corpus).toEqual([corpusOf(3), corpusOf(4)]);
  expect(ground.tasks.slice(0, 4).map((t) => t.id.slice(0, 3))).toEqual(["w3-", "w4-", "w3-", "w4-"]);
  const tools = ground.tools as (task: (typeof ground.tasks)[number]) => string;
  for (const task of ground.tasks) expect(tools(task)).toBe(corpusOf(task.id.startsWith("w3-") ? 3 : 4));
  await expect(taskGround({ tasks: dir, split: "rl", corpus: "x.jsonl" }, () => 0)).rejects.toThrow(
    "each world's own corpus",
  );

  // One world: its split, with the corpus beside it unless one is named.
  const one = await taskGround({ tasks: path.join(dir, "world-4"), split: "rl" }, (corpus) => corpus);
  expect(one.tools).toBe(corpusOf(4));
  expect(one.tasks.every((t) => t.id.startsWith("w4-"))).toBe(true);
  const named = await taskGround(
    { tasks: path.join(dir, "world-4"), split: "rl", corpus: "c.jsonl" },
    (c) => c,
  );
  expect(named.tools).toBe("c.jsonl");
});

it("requireCorpus names the flag at fault, and tells where a corpus can be named only where it can", () => {
  expect(requireCorpus("w/corpus.jsonl", "w")).toBe("w/corpus.jsonl");
  expect(() => requireCorpus(undefined, "t.jsonl")).toThrow(
    "--corpus: no corpus.jsonl next to t.jsonl; name one with --corpus",
  );
  expect(() => requireCorpus(undefined, "dev.jsonl", "--dev-tasks")).toThrow(
    /^--dev-tasks: no corpus.jsonl next to dev.jsonl$/,
  );
});
