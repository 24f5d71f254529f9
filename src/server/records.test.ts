import { mkdtemp, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { loadRecords } from "./records.js";
import { sampleMasTrace, sampleTrajectory } from "./testing.js";

describe("loadRecords", () => {
  it("reads trajectories and MAS traces from a folder and counts lines that are neither", async () => {
    const dir = await mkdtemp(path.join(tmpdir(), "coa-view-"));
    const traj = sampleTrajectory("When was it founded?", [{ steps: [{ type: "answer", text: "1947" }] }]);
    await writeFile(
      path.join(dir, "a.jsonl"),
      `${JSON.stringify(traj)}\n{"broken\n\n${JSON.stringify({ x: 1 })}\n`,
    );
    await writeFile(path.join(dir, "b.jsonl"), `${JSON.stringify(sampleMasTrace)}\n`);
    await writeFile(path.join(dir, "notes.txt"), "ignored");

    const loaded = await loadRecords([dir]);

    expect(loaded.files.map((f) => path.basename(f))).toEqual(["a.jsonl", "b.jsonl"]);
    expect(loaded.records.map((r) => [r.kind, r.line])).toEqual([
      ["trajectory", 1],
      ["mas", 1],
    ]);
    expect(loaded.skipped).toEqual([
      { file: path.join(dir, "a.jsonl"), count: 2, firstReason: "line 2: not JSON" },
    ]);
  });
});
