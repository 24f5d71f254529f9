import { createHash } from "node:crypto";
import { tagTokens } from "../protocol/index.js";
import {
  BYTE_TOKENIZER_NAME,
  ByteTokenizer,
  type PieceScheme,
  type Tokenizer,
  type TokenizerSpec,
} from "./byte-tokenizer.js";
import { appendAll } from "./ids.js";

/**
 * Byte-level BPE for the embedded engine: the byte tokenizer's ids (pad, bos, eos, one per protocol
 * tag, 256 bytes) plus merged tokens, merge k making id `byteOffset + 256 + k`. Text is cut at tags,
 * then into pieces by PIECE_PATTERNS, and merges never cross a piece. engine/coa_engine/tokenizer.py
 * is its twin; a test holds their ids equal.
 *
 * Why: byte tokens make every trajectory 2.5-3.5 times longer, and on a CPU attention cost grows with
 * the square of that. Subword pieces keep held-out names copyable (they split into trained pieces).
 */
export const BPE_TOKENIZER_PREFIX = "coa-bpe-v1-";
export const BPE_V2_TOKENIZER_PREFIX = "coa-bpe-v2-";

// ASCII classes only, so that JavaScript and Python regular expressions cut every text the same way.
const PIECE_PATTERNS: Record<PieceScheme, RegExp> = {
  v1: / ?[A-Za-z]+| ?[0-9]{1,3}| ?[^A-Za-z0-9 \t\r\n]+|[ \t\r\n]+(?![^ \t\r\n])|[ \t\r\n]+/g,
  v2: / ?[A-Za-z]+|[0-9]{1,3}(?=(?:[0-9]{3})*(?![0-9]))| ?[^A-Za-z0-9 \t\r\n]+|[ \t\r\n]+(?![^ \t\r\n])|[ \t\r\n]+/g,
};

/** The name that changes whenever an id would mean another token (same digest as the Python side). */
export function bpeName(
  tags: readonly string[],
  merges: readonly (readonly [number, number])[],
  pieces: PieceScheme = "v1",
): string {
  // v1 names keep their old digest, so files written before piece schemes existed still load.
  const [prefix, spec] =
    pieces === "v1"
      ? [BPE_TOKENIZER_PREFIX, { tags, merges }]
      : [BPE_V2_TOKENIZER_PREFIX, { tags, merges, pieces }];
  return prefix + createHash("sha256").update(JSON.stringify(spec)).digest("hex").slice(0, 12);
}

/** Splits text outside tags into the pieces merges stay within. */
export function splitPieces(text: string, pieces: PieceScheme): string[] {
  return text.match(PIECE_PATTERNS[pieces]) ?? [];
}

const pairKey = (a: number, b: number) => a * 0x100000 + b;

export class BpeTokenizer implements Tokenizer {
  readonly name: string;
  readonly vocabSize: number;
  readonly merges: readonly (readonly [number, number])[];
  readonly pieces: PieceScheme;
  private readonly base = new ByteTokenizer();
  private readonly ranks = new Map<number, number>();
  /** The bytes of every id at or above the byte offset. */
  private readonly bytesOf: Uint8Array[] = [];
  private readonly cache = new Map<string, number[]>();
  private readonly encoder = new TextEncoder();

  constructor(merges: readonly (readonly [number, number])[], pieces: PieceScheme = "v1") {
    this.pieces = pieces;
    const first = this.base.vocabSize;
    const offset = this.base.byteOffset;
    for (let b = 0; b < 256; b++) this.bytesOf.push(Uint8Array.of(b));
    merges.forEach(([a, b], k) => {
      if (a < offset || b < offset || a >= first + k || b >= first + k)
        throw new Error(`merge ${k} joins ids ${a} and ${b}; only bytes and earlier merges can be joined`);
      this.ranks.set(pairKey(a, b), k);
      const [x, y] = [this.bytesOf[a - offset], this.bytesOf[b - offset]];
      const joined = new Uint8Array(x.length + y.length);
      joined.set(x);
      joined.set(y, x.length);
      this.bytesOf.push(joined);
    });
    this.merges = merges.map(([a, b]) => [a, b] as const);
    this.vocabSize = first + merges.length;
    this.name = bpeName(tagTokens(), this.merges, pieces);
  }

  toJSON(): TokenizerSpec {
    const merges = this.merges.map(([a, b]): [number, number] => [a, b]);
    // v1 files stay byte-identical to those written before schemes existed.
    return this.pieces === "v1"
      ? { name: this.name, tags: tagTokens(), merges }
      : { name: this.name, tags: tagTokens(), merges, pieces: this.pieces };
  }

  encode(text: string): number[] {
    const ids: number[] = [];
    for (const part of this.base.splitAtTags(text)) {
      if (typeof part === "number") ids.push(part);
      else for (const piece of splitPieces(part, this.pieces)) appendAll(ids, this.encodePiece(piece));
    }
    return ids;
  }

  decode(ids: readonly number[]): string {
    const offset = this.base.byteOffset;
    const bytes: number[] = [];
    const out: string[] = [];
    const decoder = new TextDecoder();
    const flush = () => {
      if (bytes.length) out.push(decoder.decode(new Uint8Array(bytes)));
      bytes.length = 0;
    };
    for (const id of ids) {
      if (id >= offset && id < this.vocabSize) for (const b of this.bytesOf[id - offset]) bytes.push(b);
      else {
        flush();
        out.push(this.base.decode([id]));
      }
    }
    flush();
    return out.join("");
  }

  private encodePiece(piece: string): number[] {
    const hit = this.cache.get(piece);
    if (hit) return hit;
    const offset = this.base.byteOffset;
    let ids = Array.from(this.encoder.encode(piece), (b) => offset + b);
    const first = this.base.vocabSize;
    const none = this.merges.length;
    while (ids.length > 1) {
      let best = none;
      for (let i = 0; i + 1 < ids.length; i++)
        best = Math.min(best, this.ranks.get(pairKey(ids[i], ids[i + 1])) ?? none);
      if (best === none) break;
      ids = replacePair(ids, this.merges[best][0], this.merges[best][1], first + best);
    }
    if (this.cache.size < 200_000) this.cache.set(piece, ids);
    return ids;
  }
}

/** `ids` with every non-overlapping (a, b), left to right, replaced by `joined`. */
function replacePair(ids: readonly number[], a: number, b: number, joined: number): number[] {
  const out: number[] = [];
  for (let i = 0; i < ids.length; i++) {
    if (i + 1 < ids.length && ids[i] === a && ids[i + 1] === b) {
      out.push(joined);
      i++;
    } else out.push(ids[i]);
  }
  return out;
}

export interface TrainBpeOptions {
  /** Total vocabulary, specials and bytes included. */
  vocabSize: number;
  /** Pairs seen fewer times than this are never merged. */
  minPairCount?: number;
  /** How text is cut before merging; new tokenizers default to `v2`. */
  pieces?: PieceScheme;
}

/**
 * Learns merges from texts: count pieces, then repeatedly join the most frequent adjacent pair
 * (ties: the smaller ids), updating only the pieces that hold it.
 */
export function trainBpe(texts: Iterable<string>, opts: TrainBpeOptions): BpeTokenizer {
  const base = new ByteTokenizer();
  const minCount = opts.minPairCount ?? 2;
  const scheme = opts.pieces ?? "v2";
  const counts = new Map<string, number>();
  for (const text of texts)
    for (const part of base.splitAtTags(text))
      if (typeof part === "string")
        for (const piece of splitPieces(part, scheme)) counts.set(piece, (counts.get(piece) ?? 0) + 1);

  const encoder = new TextEncoder();
  const words: number[][] = [];
  const weights: number[] = [];
  for (const [piece, n] of counts) {
    const ids = Array.from(encoder.encode(piece), (b) => base.byteOffset + b);
    if (ids.length < 2) continue;
    words.push(ids);
    weights.push(n);
  }
  const pairs = new Map<number, number>();
  const where = new Map<number, Set<number>>();
  const add = (w: number, sign: 1 | -1) => {
    const ids = words[w];
    for (let i = 0; i + 1 < ids.length; i++) {
      const key = pairKey(ids[i], ids[i + 1]);
      pairs.set(key, (pairs.get(key) ?? 0) + sign * weights[w]);
      if (sign > 0) {
        const set = where.get(key) ?? new Set<number>();
        set.add(w);
        where.set(key, set);
      }
    }
  };
  for (let w = 0; w < words.length; w++) add(w, 1);

  const merges: [number, number][] = [];
  const wanted = opts.vocabSize - base.vocabSize;
  while (merges.length < wanted) {
    let bestKey = -1;
    let bestCount = minCount - 1;
    for (const [key, n] of pairs) {
      if (n > bestCount || (n === bestCount && bestKey >= 0 && key < bestKey)) {
        bestKey = key;
        bestCount = n;
      }
    }
    if (bestKey < 0) break;
    const [a, b] = [Math.floor(bestKey / 0x100000), bestKey % 0x100000];
    const joined = base.vocabSize + merges.length;
    merges.push([a, b]);
    for (const w of where.get(bestKey) ?? []) {
      add(w, -1);
      words[w] = replacePair(words[w], a, b, joined);
      add(w, 1);
    }
    where.delete(bestKey);
    for (const [key, n] of pairs) if (n <= 0) pairs.delete(key);
  }
  return new BpeTokenizer(merges, scheme);
}

/** The tokenizer a spec describes: the byte tokenizer, or a BPE whose name must match its merges. */
export function tokenizerFromSpec(spec: TokenizerSpec, where = "tokenizer"): Tokenizer {
  const tags = tagTokens();
  if (spec.tags.length !== tags.length || spec.tags.some((t, i) => t !== tags[i]))
    throw new Error(
      `${where}: its protocol tags differ from this version's; its ids would mean other tokens`,
    );
  if (!spec.merges) {
    if (spec.name !== BYTE_TOKENIZER_NAME) throw new Error(`${where}: unknown tokenizer "${spec.name}"`);
    return new ByteTokenizer();
  }
  const tok = new BpeTokenizer(spec.merges, spec.pieces ?? "v1");
  if (tok.name !== spec.name)
    throw new Error(`${where}: named "${spec.name}", but its merges make "${tok.name}" (edited by hand?)`);
  return tok;
}
