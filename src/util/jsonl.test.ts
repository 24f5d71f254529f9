import { mkdtemp, readFile, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { z } from "zod";
import { appendJsonl, readJsonlTolerant, repairJsonlTail } from "./jsonl.js";

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
  it("treats a missing file as empty", async () => {
    const file = path.join(tmpdir(), "coa-missing-file.jsonl");
    expect(await readJsonlTolerant(file, Row)).toEqual({ records: [], bad: [] });
    expect(await repairJsonlTail(file)).toBe(false);
  });
});
