import { mkdtemp } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { expect, it } from "vitest";
import { generateWorld, writeWorld } from "../../tasks/index.js";
import { worldStats } from "./world.js";

it("coa world stats prints kinds, hops and difficulty per split", async () => {
  const dir = await mkdtemp(path.join(tmpdir(), "coa-world-stats-"));
  const world = generateWorld(3, "tiny");
  await writeWorld(dir, world);
  const report = (await worldStats(dir)).split("\n");
  expect(report[0]).toBe(
    `world seed 3, size tiny, max hops 4, version 2; held-out groups ${world.manifest.heldOutGroups.join(", ")}`,
  );
  expect(report[1]).toBe("kinds:");
  expect(report[2].split(/\s+/).filter(Boolean)).toEqual([
    "split",
    "arithmetic",
    "comparison",
    "computation",
    "multihop",
    "total",
  ]);
  const train = report
    .find((l) => l.trim().startsWith("train"))!
    .trim()
    .split(/\s+/);
  expect(Number(train.at(-1))).toBe(world.splits.train.length);
  const hops = report.indexOf("hops:");
  expect(report[hops + 1].split(/\s+/).filter(Boolean)).toEqual(["split", "0", "2", "3", "4", "total"]);
  expect(report).toContain("difficulty:");
});

it("coa world stats shows only 0 and 2 hops in a --max-hops 2 world", async () => {
  const dir = await mkdtemp(path.join(tmpdir(), "coa-world-stats-"));
  await writeWorld(dir, generateWorld(3, "tiny", { maxHops: 2 }));
  const report = (await worldStats(dir)).split("\n");
  expect(report[0]).toContain("max hops 2");
  const hops = report.indexOf("hops:");
  expect(report[hops + 1].split(/\s+/).filter(Boolean)).toEqual(["split", "0", "2", "total"]);
});
