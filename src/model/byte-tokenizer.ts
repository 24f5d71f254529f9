import { tagTokens } from "../protocol/index.js";

/**
 * The embedded engine's vocabulary: pad/bos/eos, one token per protocol tag, then the 256 bytes.
 * engine/coa_engine/tokenizer.py implements the same layout from the same tag list; a test keeps
 * the two in agreement.
 */
export const BYTE_TOKENIZER_NAME = "coa-byte-v1";
export const PAD_ID = 0;
export const BOS_ID = 1;
export const EOS_ID = 2;

export interface Tokenizer {
  readonly name: string;
  readonly vocabSize: number;
  encode(text: string): number[];
  decode(ids: readonly number[]): string;
}

export class ByteTokenizer implements Tokenizer {
  readonly name = BYTE_TOKENIZER_NAME;
  readonly specials: readonly string[];
  readonly byteOffset: number;
  readonly vocabSize: number;
  private readonly specialIds: Map<string, number>;
  private readonly specialPattern: RegExp;

  constructor() {
    this.specials = ["<pad>", "<bos>", "<eos>", ...tagTokens()];
    this.specialIds = new Map(this.specials.map((s, i) => [s, i]));
    this.byteOffset = this.specials.length;
    this.vocabSize = this.byteOffset + 256;
    const tags = tagTokens().map((t) => t.replace(/[.*+?^${}()|[\]\\/]/g, "\\$&"));
    this.specialPattern = new RegExp(tags.join("|"), "g");
  }

  encode(text: string): number[] {
    const ids: number[] = [];
    const encoder = new TextEncoder();
    let last = 0;
    for (const m of text.matchAll(this.specialPattern)) {
      for (const b of encoder.encode(text.slice(last, m.index))) ids.push(this.byteOffset + b);
      ids.push(this.specialIds.get(m[0])!);
      last = m.index + m[0].length;
    }
    for (const b of encoder.encode(text.slice(last))) ids.push(this.byteOffset + b);
    return ids;
  }

  decode(ids: readonly number[]): string {
    const decoder = new TextDecoder();
    let out = "";
    let bytes: number[] = [];
    const flush = () => {
      if (bytes.length) out += decoder.decode(new Uint8Array(bytes));
      bytes = [];
    };
    for (const id of ids) {
      if (id >= this.byteOffset && id < this.vocabSize) {
        bytes.push(id - this.byteOffset);
      } else {
        flush();
        // pad/bos/eos carry no text; protocol tags decode to themselves.
        if (id > EOS_ID && id < this.byteOffset) out += this.specials[id];
        else if (id < 0 || id >= this.vocabSize)
          throw new RangeError(`token id ${id} is outside the vocabulary`);
      }
    }
    flush();
    return out;
  }
}
