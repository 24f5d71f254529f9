import { describe, expect, it } from "vitest";
import { ByteTokenizer } from "../../model/index.js";
import { pretrainCorpus } from "./corpus.js";
import { docText } from "./drills.js";
import { fertility } from "./fertility.js";
import { pretrainTokenizer } from "./tokenizer.js";

describe("fertility", () => {
  it("counts tokens per character of a text and tokens per name as running text has it", () => {
    const f = fertility(new ByteTokenizer(), { chars: 100, tokens: 100 }, ["Ab", "Cdef"]);
    expect(f).toEqual({ chars: 100, tokens: 100, tokensPerChar: 1, names: 2, tokensPerName: 4 });
  });
});

describe("pretrainTokenizer", () => {
  const corpus = pretrainCorpus({
    worlds: { train: [11, 12], eval: 13 },
    size: "tiny",
    maxHops: 2,
    mix: { articles: 1, facts: 1 },
    seed: 0,
  });

  it("learns a BPE from the training worlds that still cuts an unseen world's names into a few pieces", async () => {
    const tok = await pretrainTokenizer("bpe:600", corpus);
    expect(tok.vocabSize).toBe(600);
    const text = corpus.eval.map(docText).join("");
    const unseen = fertility(tok, { chars: text.length, tokens: tok.encode(text).length }, corpus.names.eval);
    expect(unseen.tokensPerChar).toBeLessThan(0.5);
    const bytes = fertility(new ByteTokenizer(), { chars: 1, tokens: 1 }, corpus.names.eval);
    expect(unseen.tokensPerName).toBeLessThan(0.7 * bytes.tokensPerName);
    expect(corpus.names.eval.some((n) => corpus.names.train.includes(n))).toBe(false);
  });

  it("refuses a vocabulary smaller than the bytes and tags", async () => {
    await expect(pretrainTokenizer("bpe:100", corpus)).rejects.toThrow(/at least/);
  });
});
