import { mkdtemp, readFile, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { z } from "zod";
import { appendJsonl, jsonlLines, readJsonlTolerant, repairJsonlTail } from "./jsonl.js";

const Row = z.object({ n: z.number() });

describe("JSONL with torn writes", () => {
  it("skips a torn last line, then repairs it so the next append starts clean", async () => {
    const file = path.join(await mkdtemp(path.join(tmpdir(), "coa-jsonl-")), "out.jsonl");
    await writeFile(file, '{"n":1}\n{"n":"x"}\n{"n":3');
    const before = await readJsonlTolerant(file, Row);
    expect(before.records).toEqual([{ n: 1 }]);
    expect(before.bad.map((b) => b.line)).toEqual([2, 3]);

    expect(await repairJsonlTail(file)).toBe(true);
    expect(await repairJsonlTail(file)).toBe(false);
    await appendJsonl(file, { n: 4 });
    expect(await readFile(file, "utf8")).toBe('{"n":1}\n{"n":"x"}\n{"n":4}\n');
  });
  it("makes the folders an append needs, and passes other failures on", async () => {
    const root = await mkdtemp(path.join(tmpdir(), "coa-jsonl-"));
    const file = path.join(root, "a", "b", "out.jsonl");
    await appendJsonl(file, { n: 1 });
    await appendJsonl(file, { n: 2 });
    expect(await readFile(file, "utf8")).toBe('{"n":1}\n{"n":2}\n');
    await expect(appendJsonl(path.join(root, "a"), { n: 3 })).rejects.toThrow(/EISDIR/);
  });
  it("treats a missing file as empty", async () => {
    const file = path.join(tmpdir(), "coa-missing-file.jsonl");
    expect(await readJsonlTolerant(file, Row)).toEqual({ records: [], bad: [] });
    expect(await repairJsonlTail(file)).toBe(false);
  });
});

describe("jsonlLines", () => {
  it("yields the non-blank lines with the numbers an editor shows: CRLF, blank and torn last lines too", async () => {
    const file = path.join(await mkdtemp(path.join(tmpdir(), "coa-jsonl-")), "lines.jsonl");
    await writeFile(file, '{"n":1}\r\n\n  \n{"n":2}\n{"n":3');
    const lines: { line: number; text: string }[] = [];
    for await (const l of jsonlLines(file)) lines.push(l);
    expect(lines).toEqual([
      { line: 1, text: '{"n":1}' },
      { line: 4, text: '{"n":2}' },
      { line: 5, text: '{"n":3' },
    ]);
  });
});
