import { mkdtemp, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { findTraceFiles, parseTraceLine, readTraceLines, type TraceLine } from "./read.js";
import { fullTrace, shortTrace } from "./testing/fixtures.js";

const ref = { file: "traces.jsonl", line: 7 };

describe("parseTraceLine", () => {
  it("parses a valid trace and fills schema defaults", () => {
    const { error, ...withoutError } = shortTrace();
    const line = parseTraceLine(JSON.stringify(withoutError), ref);
    expect(line.ok).toBe(true);
    if (line.ok) expect(line.trace.error).toBeNull();
  });

  it("reports a truncated line as invalid JSON", () => {
    const text = JSON.stringify(fullTrace());
    const line = parseTraceLine(text.slice(0, text.length / 2), ref);
    expect(line).toMatchObject({ ok: false, reason: "invalid_json", ref });
  });

  it("names an unknown agent by its field", () => {
    const trace = fullTrace();
    const bad = {
      ...trace,
      messages: trace.messages.map((m, i) => (i === 3 ? { ...m, from: "planner" } : m)),
    };
    const line = parseTraceLine(JSON.stringify(bad), ref);
    expect(line).toMatchObject({ ok: false, reason: "unknown_agent", taskId: "t1" });
    if (!line.ok) expect(line.detail).toMatch(/^messages\[3\]\.from: /);
  });

  it("names any other schema problem by its field", () => {
    const line = parseTraceLine(JSON.stringify({ ...shortTrace(), version: 2 }), ref);
    expect(line).toMatchObject({ ok: false, reason: "schema_error" });
    if (!line.ok) expect(line.detail).toMatch(/^version: /);
  });
});

describe("readTraceLines", () => {
  it("reads every non-blank line with its file and line number, bad ones included", async () => {
    const dir = await mkdtemp(path.join(tmpdir(), "coa-read-"));
    const good = JSON.stringify(shortTrace());
    await writeFile(path.join(dir, "traces.jsonl"), `${good}\n\n${good}\n${good.slice(0, 40)}`);
    await writeFile(path.join(dir, "metrics.jsonl"), "{}\n");
    const files = await findTraceFiles(dir);
    expect(files).toEqual([path.join(dir, "traces.jsonl")]);
    const lines: TraceLine[] = [];
    for await (const l of readTraceLines(files)) lines.push(l);
    expect(lines.map((l) => [l.ref.line, l.ok])).toEqual([
      [1, true],
      [3, true],
      [4, false],
    ]);
  });

  it("says clearly when there is nothing to read", async () => {
    const dir = await mkdtemp(path.join(tmpdir(), "coa-read-"));
    await expect(findTraceFiles(dir)).rejects.toThrow(/no trace files/);
    await expect(findTraceFiles(path.join(dir, "missing"))).rejects.toThrow(/no such file or folder/);
  });
});
