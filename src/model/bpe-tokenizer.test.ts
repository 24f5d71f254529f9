import { execFileSync } from "node:child_process";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { tagTokens } from "../protocol/index.js";
import { BpeTokenizer, splitPieces, tokenizerFromSpec, trainBpe } from "./bpe-tokenizer.js";
import { BYTE_TOKENIZER_NAME, ByteTokenizer } from "./byte-tokenizer.js";
import { engineRoot } from "./engine-python.js";
import { readTokenizerFile } from "./tokenizer-files.js";

const CORPUS = [
  "<think>Find the founder of the Mavar Botanical Foundation.</think>",
  "<web_search>Mavar Botanical Foundation founded by</web_search>",
  "<observation>1. Mavar Botanical Foundation (https://world.local/wiki/Mavar_Botanical_Foundation)\n   The Mavar Botanical Foundation was founded by Bebrut Mavar in 1917.</observation>",
  "<think>The Mavar Botanical Foundation was founded by Bebrut Mavar.</think>",
  "<answer>Bebrut Mavar</answer>",
  "In 1981, Lezoul hosted the Staeld River Assembly, organized by the Mavar Botanical Foundation; 203,749 people attended.",
];

const TRICKY = [
  "",
  "plain ascii, with  two spaces\n\n  and\tindents",
  "<think>naïve café 日本語 🎉</think>",
  "<answer>a</answer><answer",
  "</think </thinking> <thin>k> <<plan>>",
  "lone \ud800 surrogate and a pair 😀",
  "Founded in 1,917,204 — 3.14159; x=-7",
  "Mavar Botanical Foundation\r\nMavarBotanical",
];

describe("BpeTokenizer", () => {
  const tok = trainBpe([...CORPUS, ...CORPUS], { vocabSize: new ByteTokenizer().vocabSize + 60 });

  it("learns merges that shorten the text it was trained on, and keeps the byte ids", () => {
    const bytes = new ByteTokenizer();
    expect(tok.vocabSize).toBe(bytes.vocabSize + 60);
    const text = CORPUS.join("\n");
    expect(tok.encode(text).length).toBeLessThan(bytes.encode(text).length / 2);
    // Tags and bytes keep the byte tokenizer's ids.
    for (const tag of tagTokens()) expect(tok.encode(tag)).toEqual(bytes.encode(tag));
    expect(tok.encode("\u00e9")).toEqual(bytes.encode("\u00e9"));
  });

  it("round-trips any text, tags and broken Unicode included", () => {
    const bytes = new ByteTokenizer();
    for (const text of TRICKY)
      expect(tok.decode(tok.encode(text)), text).toBe(bytes.decode(bytes.encode(text)));
  });

  it("never merges across pieces, so a word's ids do not depend on its neighbours", () => {
    expect(splitPieces("The Mavar  Foundation, 1917!\n  x", "v1")).toEqual([
      "The",
      " Mavar",
      " ",
      " Foundation",
      ",",
      " 191",
      "7",
      "!",
      "\n ",
      " x",
    ]);
    const alone = tok.encode(" Mavar");
    expect(tok.pieces).toBe("v2");
    expect(tok.encode("Bebrut Mavar in")).toEqual([...tok.encode("Bebrut"), ...alone, ...tok.encode(" in")]);
  });

  it("cuts a digit run in v2 the same wherever it stands: apart from the space before it, in threes from the right", () => {
    expect(splitPieces("drew 88455, printed 88,455; print(abs(1917 - 88455))", "v2")).toEqual([
      "drew",
      " ",
      "88",
      "455",
      ",",
      " printed",
      " ",
      "88",
      ",",
      "455",
      ";",
      " print",
      "(",
      "abs",
      "(",
      "1",
      "917",
      " -",
      " ",
      "88",
      "455",
      "))",
    ]);
    // v1 cut the same value differently in each place: a model had to re-cut it to copy it.
    expect(splitPieces(" 88455 88,455 (88455", "v1")).toEqual([
      " 884",
      "55",
      " 88",
      ",",
      "455",
      " (",
      "884",
      "55",
    ]);
    const value = tok.encode("88455");
    for (const written of [" 88455", "(88455", "[88455,", " 88,455"])
      expect(tok.encode(written).filter((id) => value.includes(id))).toEqual(value);
  });

  it("reads v1 files as they were written: the old cut, the old name, no pieces field", () => {
    const v1 = trainBpe([...CORPUS, ...CORPUS], { vocabSize: tok.vocabSize, pieces: "v1" });
    const spec = v1.toJSON();
    expect(spec.name).toMatch(/^coa-bpe-v1-[0-9a-f]{12}$/);
    expect(spec).not.toHaveProperty("pieces");
    const back = tokenizerFromSpec(spec);
    expect(back.name).toBe(v1.name);
    expect(back.encode(" 88455")).toEqual(v1.encode(" 88455"));
    // Same merges under the other scheme are another vocabulary, so another name.
    expect(new BpeTokenizer(v1.merges, "v2").name).not.toBe(v1.name);
  });

  it("is named by its merges and refuses a spec whose name does not match", () => {
    const spec = tok.toJSON();
    expect(spec.name).toMatch(/^coa-bpe-v2-[0-9a-f]{12}$/);
    expect(spec.pieces).toBe("v2");
    expect(tokenizerFromSpec(spec).name).toBe(tok.name);
    expect(() => tokenizerFromSpec({ ...spec, merges: spec.merges!.slice(0, -1) })).toThrow(/merges make/);
    expect(() => tokenizerFromSpec({ ...spec, tags: spec.tags.slice(1) })).toThrow(/tags differ/);
    expect(() => new BpeTokenizer([[3, 300]])).toThrow(/merge 0 joins/);
    expect(tokenizerFromSpec({ name: BYTE_TOKENIZER_NAME, tags: tagTokens() })).toBeInstanceOf(ByteTokenizer);
  });

  it("reads tokenizer files and names the file on errors", async () => {
    const dir = await mkdtemp(path.join(os.tmpdir(), "coa-bpe-"));
    try {
      const good = path.join(dir, "tokenizer.json");
      await writeFile(good, JSON.stringify(tok.toJSON()));
      expect((await readTokenizerFile(good)).name).toBe(tok.name);
      const bad = path.join(dir, "bad-tokenizer.json");
      await writeFile(bad, JSON.stringify({ name: "x", tags: "no" }));
      await expect(readTokenizerFile(bad)).rejects.toThrow(/bad-tokenizer\.json: field tags/);
      await expect(readTokenizerFile(path.join(dir, "missing.json"))).rejects.toThrow(
        /missing\.json: cannot read/,
      );
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  it.each(["v1", "v2"] as const)(
    "gives the same ids and name as the engine's Python tokenizer (%s)",
    (pieces) => {
      const tok = trainBpe([...CORPUS, ...CORPUS], { vocabSize: new ByteTokenizer().vocabSize + 60, pieces });
      const script = [
        "import json, sys",
        "from coa_engine.tokenizer import tokenizer_from_json",
        "req = json.load(sys.stdin)",
        "tok = tokenizer_from_json(req['spec'])",
        "print(json.dumps({'name': tok.name, 'ids': [tok.encode(t) for t in req['texts']]}))",
      ].join("\n");
      const texts = [...CORPUS, ...TRICKY, "88455 and 88,455; 1234567 or 1,234,567 at 3.14159 x12345y"];
      const out = execFileSync("python3", ["-c", script], {
        cwd: engineRoot(),
        input: JSON.stringify({ spec: tok.toJSON(), texts }),
        encoding: "utf8",
      });
      const py = JSON.parse(out) as { name: string; ids: number[][] };
      expect(py.name).toBe(tok.name);
      for (const [i, t] of texts.entries()) expect(py.ids[i], t).toEqual(tok.encode(t));
    },
  );
});
