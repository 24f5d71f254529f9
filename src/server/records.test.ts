import { mkdtemp, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { renderRecordPage } from "./html.js";
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

  it("reads records written before v2 and shows the gold answers eval or distill kept", async () => {
    const dir = await mkdtemp(path.join(tmpdir(), "coa-view-"));
    const {
      version: _,
      meta,
      ...v2
    } = sampleTrajectory("When was it founded?", [{ steps: [{ type: "answer", text: "1947" }] }]);
    // v1: no version, one flat meta; eval wrote the gold answers beside its verdict, distill its own.
    const v1Eval = { ...v2, meta: { ...meta.runtime, answers: ["1947"], eval: meta.eval } };
    const v1Distill = {
      ...v2,
      origin: "distill",
      meta: { source: "world", taskKind: "lookup", answers: ["nineteen forty-seven"], driver: "expert" },
    };
    await writeFile(path.join(dir, "v1.jsonl"), `${JSON.stringify(v1Eval)}\n${JSON.stringify(v1Distill)}\n`);

    const loaded = await loadRecords([dir]);
    expect(loaded.skipped).toEqual([]);
    const pages = loaded.records.map((rec, i) =>
      renderRecordPage(rec, i, { root: dir, tokenizers: loaded.tokenizers }),
    );
    expect(pages[0]).toContain("<b>gold</b> 1947");
    expect(pages[1]).toContain("<b>gold</b> nineteen forty-seven");
  });
});
