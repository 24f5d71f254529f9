import { writeFile } from "node:fs/promises";
import { describe, expect, it } from "vitest";
import { CorpusError, readCorpus, readCorpusRows } from "./corpus.js";
import { WORLD_DOCS, writeCorpusFile } from "./test-corpus.js";

async function collect(path: string) {
  const rows = [];
  for await (const row of readCorpus(path)) rows.push(row);
  return rows;
}

describe("readCorpus", () => {
  it("streams every row with its line and byte position, and reads rows back by position", async () => {
    const path = await writeCorpusFile();
    const rows = await collect(path);
    expect(rows.map((r) => r.doc)).toEqual(WORLD_DOCS);
    expect(rows.map((r) => r.line)).toEqual([1, 2, 3, 4, 5]);
    const back = await readCorpusRows(path, [rows[3], rows[0]]);
    expect(back.map((d) => d.id)).toEqual(["w4", "w1"]);
  });

  it("skips blank lines, accepts CRLF and a missing final newline, and counts lines in UTF-8 text", async () => {
    const path = await writeCorpusFile();
    const a = JSON.stringify({ id: "a", title: "Ünïcode — ✓", text: "x" });
    const b = JSON.stringify({ id: "b", title: "B", text: "y" });
    await writeFile(path, `${a}\r\n\n${b}`);
    const rows = await collect(path);
    expect(rows.map((r) => [r.doc.id, r.line])).toEqual([
      ["a", 1],
      ["b", 3],
    ]);
    expect((await readCorpusRows(path, rows)).map((d) => d.title)).toEqual(["Ünïcode — ✓", "B"]);
  });

  it("names file, line and field of a bad row", async () => {
    const path = await writeCorpusFile();
    await writeFile(path, `${JSON.stringify(WORLD_DOCS[0])}\n{"id":"x","title":3,"text":"t"}\n`);
    await expect(collect(path)).rejects.toThrow(
      new CorpusError(`${path}:2: field "title": Invalid input: expected string, received number`),
    );
    await writeFile(path, `${JSON.stringify(WORLD_DOCS[0])}\n\n{"id":"x",\n`);
    await expect(collect(path)).rejects.toThrow(`${path}:3: invalid JSON`);
    await writeFile(path, `{"title":"t","text":"t"}\n`);
    await expect(collect(path)).rejects.toThrow(`${path}:1: field "id"`);
  });
});
