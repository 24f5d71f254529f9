import { describe, expect, it } from "vitest";
import { ByteTokenizer } from "../../model/index.js";
import { pretrainCorpus } from "./corpus.js";
import { pretrainText } from "./data.js";

describe("pretrainText", () => {
  const tok = new ByteTokenizer();
  const corpus = pretrainCorpus({
    worlds: { train: [21], eval: 22 },
    size: "tiny",
    maxHops: 2,
    mix: { articles: 1, lookup: 1 },
    seed: 0,
  });
  const config = {
    worlds: { train: [21], eval: 22 },
    batchTokens: 1024,
    maxLength: 256,
    evalTokens: 1000,
    copyExamples: 8,
    seed: 3,
  };
  const text = pretrainText(config, tok, corpus);

  it("makes steps of whole sequences, loss on every token with a prefix, a new order each pass", () => {
    const first = text.batches.at(0, 0);
    expect(first).toHaveLength(4);
    for (const s of first) {
      expect(s.input_ids).toHaveLength(256);
      expect(s.loss_mask).toEqual([0, ...Array(255).fill(1)]);
    }
    expect(text.batches.at(0, 0)).toEqual(first);
    expect(text.batches.at(1, 0)).not.toEqual(first);
    expect(text.data.epoch).toMatchObject({ steps: text.batches.count(0), sequencesPerStep: 4 });
  });

  it("holds out whole sequences of the unseen world, and its copied names and read values alone", () => {
    expect(text.evals.eval_loss.flat()).toHaveLength(4); // ceil(1000 / 256)
    const copies = text.evals.eval_copy_loss.flat();
    const reads = text.evals.eval_read_loss.flat();
    expect(copies).toHaveLength(8);
    expect(reads).toHaveLength(8);
    for (const s of [...copies, ...reads]) {
      expect(tok.decode(s.input_ids)).toMatch(/^Question: /);
      // Each stretch the loss is on repeats, verbatim, text before it: a copy, not a guess.
      for (let i = 0; i < s.input_ids.length; i++) {
        if (!s.loss_mask[i] || s.loss_mask[i - 1]) continue;
        let end = i;
        while (s.loss_mask[end]) end++;
        const before = tok.decode(s.input_ids.slice(0, i));
        expect(before).toMatch(/(:| is)$/);
        expect(before).toContain(tok.decode(s.input_ids.slice(i, end)).trim());
      }
    }
    expect(reads.some((s) => tok.decode(s.input_ids).includes("\nFound: the "))).toBe(true);
    expect(text.data.eval.copyTokens).toBe(
      copies.reduce((n, s) => n + s.loss_mask.filter(Boolean).length, 0),
    );
    expect(text.data.eval.readTokens).toBe(reads.reduce((n, s) => n + s.loss_mask.filter(Boolean).length, 0));
  });

  it("describes the text: kinds, worlds, and a byte tokenizer's fertility of one token per character", () => {
    expect(Object.keys(text.data.documents)).toEqual(["articles", "lookup"]);
    expect(text.data.worlds).toEqual({ train: [21], eval: 22 });
    expect(text.data.fertility.heldOut.tokensPerChar).toBe(1);
  });
});
