import { EOS_ID, type Tokenizer } from "../../model/index.js";
import type { PretrainDoc } from "./drills.js";

/** A document's ids, part by part, and 1 on each token of a part that copies earlier text. */
export function encodeDoc(tok: Tokenizer, doc: PretrainDoc): { ids: number[]; copy: number[] } {
  const ids: number[] = [];
  const copy: number[] = [];
  // Part by part: a copied name then always starts a token, as it does after a space in running text.
  for (const part of doc.parts) {
    const partIds = tok.encode(part.text);
    ids.push(...partIds);
    for (let i = 0; i < partIds.length; i++) copy.push(part.copy ? 1 : 0);
  }
  return { ids, copy };
}

/** The training form of a document: its ids then EOS, so the model learns where a text ends. */
export function streamIds(tok: Tokenizer, doc: PretrainDoc): Int32Array {
  const { ids } = encodeDoc(tok, doc);
  const out = new Int32Array(ids.length + 1);
  out.set(ids);
  out[ids.length] = EOS_ID;
  return out;
}

/**
 * One pass over the documents: laid end to end in `order` and cut into sequences of `length`
 * tokens; a tail shorter than one sequence is dropped. A document may span two sequences, so no
 * token is padding. Sequences are cut out on demand, since a pass can hold millions of tokens.
 */
export class PackedStream {
  /** How many whole sequences the pass holds. */
  readonly count: number;
  /** Where each document of `order` starts in the stream. */
  private readonly starts: Float64Array;

  constructor(
    private readonly docs: readonly Int32Array[],
    private readonly order: readonly number[],
    private readonly length: number,
  ) {
    this.starts = new Float64Array(order.length + 1);
    for (let i = 0; i < order.length; i++) this.starts[i + 1] = this.starts[i] + docs[order[i]].length;
    this.count = Math.floor(this.starts[order.length] / length);
  }

  /** Sequence `k` (0-based, below `count`) as token ids. */
  sequence(k: number): number[] {
    if (!(k >= 0 && k < this.count)) throw new RangeError(`sequence ${k} of ${this.count}`);
    let pos = k * this.length;
    const end = pos + this.length;
    // The last document starting at or before pos.
    let lo = 0;
    let hi = this.order.length - 1;
    while (lo < hi) {
      const mid = (lo + hi + 1) >> 1;
      if (this.starts[mid] <= pos) lo = mid;
      else hi = mid - 1;
    }
    const out: number[] = [];
    for (let i = lo; pos < end; i++) {
      const doc = this.docs[this.order[i]];
      const from = pos - this.starts[i];
      const to = Math.min(doc.length, end - this.starts[i]);
      for (let j = from; j < to; j++) out.push(doc[j]);
      pos = this.starts[i] + to;
    }
    return out;
  }
}
