import { z } from "zod";
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

/**
 * How text is cut into pieces before merging. `v1` joins a digit run to the space before it and cuts
 * it into threes from the left, so the same value is ` 193|7` after a space, `19|37` after `(`, 884|55
 * plain and 88|,|455 as an article prints it: a model copying a value from one place to another must
 * re-cut it, which a small model fails at (docs/learning.md). `v2` gives every digit run the same
 * pieces wherever it stands: never joined to the space or sign before it, cut into threes from the
 * right as thousands separators cut it, so 88455 is 88|455 everywhere and copying a value only drops
 * the commas. Files without the field are `v1`.
 */
export const PieceScheme = z.enum(["v1", "v2"]);
export type PieceScheme = z.infer<typeof PieceScheme>;

/** A vocabulary as a file or checkpoint manifest holds it: the byte tokenizer has no merges. */
export const TokenizerSpec = z.object({
  name: z.string(),
  tags: z.array(z.string()),
  merges: z.array(z.tuple([z.number().int(), z.number().int()])).optional(),
  /** How a BPE cuts text before merging; absent: `v1`. */
  pieces: PieceScheme.optional(),
});
export type TokenizerSpec = z.infer<typeof TokenizerSpec>;

export interface Tokenizer {
  readonly name: string;
  readonly vocabSize: number;
  encode(text: string): number[];
  decode(ids: readonly number[]): string;
  /** What `tokenizerFromSpec` rebuilds this tokenizer from. */
  toJSON(): TokenizerSpec;
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

  toJSON(): TokenizerSpec {
    return { name: this.name, tags: tagTokens() };
  }

  encode(text: string): number[] {
    const ids: number[] = [];
    const encoder = new TextEncoder();
    for (const part of this.splitAtTags(text)) {
      if (typeof part === "number") ids.push(part);
      else for (const b of encoder.encode(part)) ids.push(this.byteOffset + b);
    }
    return ids;
  }

  /** The text cut at protocol tags: plain runs as strings, each tag as its id. */
  *splitAtTags(text: string): Generator<string | number> {
    let last = 0;
    for (const m of text.matchAll(this.specialPattern)) {
      if (m.index > last) yield text.slice(last, m.index);
      yield this.specialIds.get(m[0])!;
      last = m.index + m[0].length;
    }
    if (last < text.length) yield text.slice(last);
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
