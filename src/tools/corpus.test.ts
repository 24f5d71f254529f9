import { writeFile } from "node:fs/promises";
import { gzipSync } from "node:zlib";
import { describe, expect, it } from "vitest";
import { type CorpusRow, readCorpus } from "./corpus.js";
import { WORLD_DOCS, writeCorpusFile } from "./test-corpus.js";

async function collect(path: string, opts: Parameters<typeof readCorpus>[1] = {}) {
  const rows: CorpusRow[] = [];
  for await (const row of readCorpus(path, opts)) rows.push(row);
  return rows;
}

describe("readCorpus", () => {
  it("streams every row with its line and the byte after it, and starts again from any row", async () => {
    const path = await writeCorpusFile();
    const rows = await collect(path);
    expect(rows.map((r) => ("doc" in r ? r.doc : r.error))).toEqual(WORLD_DOCS);
    expect(rows.map((r) => r.line)).toEqual([1, 2, 3, 4, 5]);
    const rest = await collect(path, { from: { byte: rows[2].end, line: rows[2].line } });
    expect(rest.map((r) => [r.line, "doc" in r && r.doc.id])).toEqual([
      [4, "w4"],
      [5, "w5"],
    ]);
  });

  it("skips blank lines, accepts CRLF and a missing final newline, and counts lines in UTF-8 text", async () => {
    const path = await writeCorpusFile();
    const a = JSON.stringify({ id: "a", title: "Ünïcode — ✓", text: "x" });
    const b = JSON.stringify({ id: "b", title: "B", text: "y" });
    await writeFile(path, `${a}\r\n\n${b}`);
    const rows = await collect(path);
    expect(rows.map((r) => [r.line, "doc" in r && r.doc.title])).toEqual([
      [1, "Ünïcode — ✓"],
      [3, "B"],
    ]);
    expect(rows[1].end).toBe(Buffer.byteLength(`${a}\r\n\n${b}`));
  });

  it("reports a bad row by file, line and field, and reads on", async () => {
    const path = await writeCorpusFile();
    await writeFile(path, `{"id":"x","title":3,"text":"t"}\n{"id":"x",\n${JSON.stringify(WORLD_DOCS[0])}\n`);
    const rows = await collect(path);
    expect(rows.map((r) => ("error" in r ? r.error : r.doc.id))).toEqual([
      `${path}:1: field "title": Invalid input: expected string, received number`,
      expect.stringMatching(new RegExp(`^${path}:2: invalid JSON`)),
      "w1",
    ]);
  });

  it("holds no more than the row limit of an over-long row, with or without a final newline", async () => {
    const path = await writeCorpusFile();
    const long = JSON.stringify({ id: "l", title: "L", text: "y".repeat(200_000) });
    await writeFile(path, `${long}\n${JSON.stringify(WORLD_DOCS[1])}\n${long}`);
    const rows = await collect(path, { maxRowBytes: 1000 });
    expect(rows.map((r) => ("error" in r ? r.error : r.doc.id))).toEqual([
      `${path}:1: row of ${long.length} bytes is over the limit of 1000`,
      "w2",
      `${path}:3: row of ${long.length} bytes is over the limit of 1000`,
    ]);
  });

  it("reads gzip and reports the compressed bytes read", async () => {
    const path = `${await writeCorpusFile()}.gz`;
    const plain = `${WORLD_DOCS.map((d) => JSON.stringify(d)).join("\n")}\n`;
    const packed = gzipSync(plain);
    await writeFile(path, packed);
    let read = 0;
    const rows = await collect(path, { onRead: (n) => (read = n) });
    expect(rows.length).toBe(5);
    expect(rows[4].end).toBe(Buffer.byteLength(plain));
    expect(read).toBe(packed.length);
  });
});
