import { describe, expect, it } from "vitest";
import { layoutOf, parseJsonRow, parseTsvRow, splitContents } from "./corpus-formats.js";

describe("corpus layouts", () => {
  it("tells the layout from the file name, through .gz", () => {
    expect(
      ["a.jsonl", "a.jsonl.gz", "wiki-18.jsonl", "psgs_w100.tsv", "psgs_w100.tsv.gz"].map(layoutOf),
    ).toEqual(["jsonl", "jsonl", "jsonl", "tsv", "tsv"]);
  });

  it("reads the Search-R1 contents layout: the quoted first line is the title", () => {
    expect(
      parseJsonRow(JSON.stringify({ id: "7", contents: '"A "quoted" title"\nline one\nline two' }), "f:1"),
    ).toEqual({
      id: "7",
      title: 'A "quoted" title',
      text: "line one\nline two",
    });
    expect(splitContents("no title line")).toEqual({ title: "", text: "no title line" });
    expect(() => parseJsonRow('{"id":"1","contents":5}', "f:2")).toThrow('f:2: field "contents"');
  });

  it("reads DPR TSV rows, unquoting CSV-style fields, and skips the header", () => {
    expect(parseTsvRow("id\ttext\ttitle", "f:1")).toBeNull();
    expect(parseTsvRow('12\t"He said ""hi"""\tGreeting', "f:2")).toEqual({
      id: "12",
      title: "Greeting",
      text: 'He said "hi"',
    });
    expect(() => parseTsvRow("12\tonly two", "f:3")).toThrow(
      "f:3: expected 3 tab-separated fields (id, text, title), found 2",
    );
  });
});
