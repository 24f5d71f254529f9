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
    expect(splitPieces("The Mavar  Foundation, 1917!\n  x")).toEqual([
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
    expect(tok.encode("Bebrut Mavar in")).toEqual([...tok.encode("Bebrut"), ...alone, ...tok.encode(" in")]);
  });

  it("is named by its merges and refuses a spec whose name does not match", () => {
    const spec = tok.toJSON();
    expect(spec.name).toMatch(/^coa-bpe-v1-[0-9a-f]{12}$/);
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

  it("gives the same ids and name as the engine's Python tokenizer", () => {
    const script = [
      "import json, sys",
      "from coa_engine.tokenizer import tokenizer_from_json",
      "req = json.load(sys.stdin)",
      "tok = tokenizer_from_json(req['spec'])",
      "print(json.dumps({'name': tok.name, 'ids': [tok.encode(t) for t in req['texts']]}))",
    ].join("\n");
    const texts = [...CORPUS, ...TRICKY];
    const out = execFileSync("python3", ["-c", script], {
      cwd: engineRoot(),
      input: JSON.stringify({ spec: tok.toJSON(), texts }),
      encoding: "utf8",
    });
    const py = JSON.parse(out) as { name: string; ids: number[][] };
    expect(py.name).toBe(tok.name);
    for (const [i, t] of texts.entries()) expect(py.ids[i], t).toEqual(tok.encode(t));
  });
});
