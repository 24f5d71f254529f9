import { mkdtemp, readFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { loadTasks } from "../index.js";
import { interleave, isWorldSet, parseSeeds, readWorldSet, writeWorldSet } from "./set.js";

describe("parseSeeds", () => {
  it("reads ranges and lists, in order, without repeats", () => {
    expect(parseSeeds("101-104")).toEqual([101, 102, 103, 104]);
    expect(parseSeeds("7, 3,3-4")).toEqual([7, 3, 4]);
  });

  it("refuses what is not a seed list", () => {
    expect(() => parseSeeds("9-2")).toThrow("runs backwards");
    expect(() => parseSeeds("1,x")).toThrow('"x" is neither');
    expect(() => parseSeeds("")).toThrow("neither");
  });
});

describe("interleave", () => {
  it("takes one from each list in turn", () => {
    expect(interleave<number | string>([[1, 2, 3], ["a"], [10, 20]])).toEqual([1, "a", 10, 2, 20, 3]);
  });
});

describe("world sets", () => {
  it("writes one ordinary world per seed and reads them back", async () => {
    const dir = await mkdtemp(path.join(os.tmpdir(), "coa-worldset-"));
    const manifest = await writeWorldSet(dir, [3, 4], { size: "tiny", maxHops: 2 });
    expect(manifest.worlds.map((w) => w.dir)).toEqual(["world-3", "world-4"]);
    expect(await isWorldSet(dir)).toBe(true);
    expect(await isWorldSet(path.join(dir, "world-3"))).toBe(false);
    const worlds = await readWorldSet(dir);
    expect(worlds.map((w) => w.seed)).toEqual([3, 4]);
    const { tasks } = await loadTasks(worlds[1].dir, { split: "train" });
    expect(tasks[0].id).toMatch(/^w4-/);
    expect(JSON.parse(await readFile(path.join(worlds[0].dir, "world.json"), "utf8")).seed).toBe(3);
  });
});
