import { describe, expect, it } from "vitest";
import { ByteTokenizer, EOS_ID } from "../../model/index.js";
import { encodeDoc, PackedStream, streamIds } from "./packing.js";

describe("PackedStream", () => {
  const docs = [Int32Array.of(1, 2, 3), Int32Array.of(4, 5), Int32Array.of(6, 7, 8, 9)];

  it("lays documents end to end in the given order and cuts whole sequences, dropping the tail", () => {
    const pass = new PackedStream(docs, [2, 0, 1], 4);
    expect(pass.count).toBe(2);
    expect([pass.sequence(0), pass.sequence(1)]).toEqual([
      [6, 7, 8, 9],
      [1, 2, 3, 4],
    ]);
    expect(() => pass.sequence(2)).toThrow(RangeError);
  });

  it("lets a sequence span several documents", () => {
    const pass = new PackedStream(docs, [0, 1, 2], 3);
    expect(Array.from({ length: pass.count }, (_, k) => pass.sequence(k))).toEqual([
      [1, 2, 3],
      [4, 5, 6],
      [7, 8, 9],
    ]);
  });
});

describe("encodeDoc", () => {
  const tok = new ByteTokenizer();
  const doc = {
    kind: "lookup" as const,
    parts: [
      { text: "Q: Ab\nLookup:", copy: false },
      { text: " Ab", copy: true },
    ],
  };

  it("marks the tokens of copied parts", () => {
    const { ids, copy } = encodeDoc(tok, doc);
    expect(tok.decode(ids)).toBe("Q: Ab\nLookup: Ab");
    expect(copy).toEqual([...Array(13).fill(0), 1, 1, 1]);
  });

  it("ends the training form of a document with EOS", () => {
    const ids = streamIds(tok, doc);
    expect(ids.length).toBe(17);
    expect(ids[16]).toBe(EOS_ID);
  });
});
