import { mkdtemp, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { trajectoryOf } from "../test-trajectories.js";
import { fitLength, loadSftData, resolveTrajectoryFile, toSftExample } from "./data.js";

const traj = trajectoryOf(
  "t1",
  [1, 2, 3],
  [
    { source: "model", ids: [10, 11] },
    { source: "tool", ids: [20, 21, 22] },
    { source: "model", ids: [12] },
  ],
);

describe("toSftExample", () => {
  it("puts loss on model tokens only, never on prompt or tool tokens", () => {
    const ex = toSftExample(traj);
    expect(ex.inputIds).toEqual([1, 2, 3, 10, 11, 20, 21, 22, 12]);
    expect(ex.lossMask).toEqual([0, 0, 0, 1, 1, 0, 0, 0, 1]);
  });
});

describe("fitLength", () => {
  const ex = toSftExample(traj);
  it("truncates keeping the start, or drops", () => {
    expect(fitLength(ex, 6, "truncate")?.example.lossMask).toEqual([0, 0, 0, 1, 1, 0]);
    expect(fitLength(ex, 6, "drop")).toBeNull();
    expect(fitLength(ex, 9, "drop")?.truncated).toBe(false);
  });
  it("drops a truncation left with no trainable token", () => {
    expect(fitLength(ex, 3, "truncate")).toBeNull();
  });
});

describe("loadSftData", () => {
  it("reports bad lines by number and keeps going", async () => {
    const dir = await mkdtemp(path.join(os.tmpdir(), "coa-sft-data-"));
    const lines = [
      JSON.stringify(traj),
      "{not json",
      JSON.stringify({ ...traj, promptIds: "x" }),
      "",
      JSON.stringify(traj),
    ];
    await writeFile(path.join(dir, "native.jsonl"), `${lines.join("\n")}\n`);
    const file = await resolveTrajectoryFile(dir);
    const data = await loadSftData(file, { maxLength: 100, overlong: "truncate" });
    expect(data.examples).toHaveLength(2);
    expect(data.bad.map((b) => b.line)).toEqual([2, 3]);
    expect(data.bad[1].message).toContain("promptIds");
  });

  it("trains on a native.jsonl written before v2 exactly as on its v2 form", async () => {
    const dir = await mkdtemp(path.join(os.tmpdir(), "coa-sft-data-"));
    const { version: _, ...rest } = traj;
    const v1 = {
      ...rest,
      origin: "distill",
      meta: { source: "world", answers: ["x"], trace: "traces.jsonl:1" },
    };
    await writeFile(path.join(dir, "v1.jsonl"), `${JSON.stringify(v1)}\n`);
    await writeFile(path.join(dir, "v2.jsonl"), `${JSON.stringify(traj)}\n`);
    const opts = { maxLength: 100, overlong: "truncate" } as const;
    const old = await loadSftData(path.join(dir, "v1.jsonl"), opts);
    expect(old.bad).toEqual([]);
    expect(old).toEqual(await loadSftData(path.join(dir, "v2.jsonl"), opts));
    expect(old.examples).toHaveLength(1);
  });
});
