import { hashString } from "../tasks/index.js";

/** Lowercased words with punctuation dropped: "What's X?" and "whats x" compare equal. */
export function normalizeWords(text: string): string[] {
  return text
    .toLowerCase()
    .normalize("NFKD")
    .replace(/[\u0300-\u036f']/g, "")
    .split(/[^\p{L}\p{N}]+/u)
    .filter(Boolean);
}

/** Word n-gram shingles; a text shorter than n words is one shingle. */
export function shingles(text: string, n: number): Set<string> {
  const words = normalizeWords(text);
  const out = new Set<string>();
  if (words.length <= n) {
    out.add(words.join(" "));
    return out;
  }
  for (let i = 0; i + n <= words.length; i++) out.add(words.slice(i, i + n).join(" "));
  return out;
}

export function jaccard(a: ReadonlySet<string>, b: ReadonlySet<string>): number {
  if (a.size === 0 && b.size === 0) return 1;
  let shared = 0;
  for (const x of a) if (b.has(x)) shared++;
  return shared / (a.size + b.size - shared);
}

/** murmur3's finalizer: a cheap, well-mixed family of hash functions indexed by `seed`. */
function mix(x: number, seed: number): number {
  let h = (x ^ Math.imul(seed + 1, 0x9e3779b1)) >>> 0;
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b);
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35);
  h ^= h >>> 16;
  return h >>> 0;
}

/** MinHash signature: for each of `numHashes` hash functions, the least hash over the shingles. */
export function minhash(shingleSet: ReadonlySet<string>, numHashes: number): Uint32Array {
  const sig = new Uint32Array(numHashes).fill(0xffffffff);
  for (const s of shingleSet) {
    const base = hashString(s);
    for (let i = 0; i < numHashes; i++) {
      const h = mix(base, i);
      if (h < sig[i]!) sig[i] = h;
    }
  }
  return sig;
}

export interface NearDuplicateOptions {
  threshold: number;
  shingleWords: number;
  numHashes: number;
  bands: number;
}

export interface DuplicateOf {
  /** Index of the earlier text this one duplicates. */
  of: number;
  similarity: number;
}

/**
 * For each text, the earlier text it nearly duplicates, or null. Candidates come from MinHash LSH
 * (texts sharing a band of their signature); each candidate is confirmed by exact Jaccard on the
 * shingle sets, so the result has no false positives. The first of a group is kept as the original.
 */
export function findNearDuplicates(
  texts: readonly string[],
  opts: NearDuplicateOptions,
): (DuplicateOf | null)[] {
  const rows = opts.numHashes / opts.bands;
  const buckets = new Map<string, number[]>();
  const sets: Set<string>[] = [];
  return texts.map((text, i) => {
    const set = shingles(text, opts.shingleWords);
    sets.push(set);
    const sig = minhash(set, opts.numHashes);
    const candidates = new Set<number>();
    const keys: string[] = [];
    for (let b = 0; b < opts.bands; b++) {
      const key = `${b}:${Array.from(sig.subarray(b * rows, (b + 1) * rows)).join(",")}`;
      keys.push(key);
      for (const j of buckets.get(key) ?? []) candidates.add(j);
    }
    let best: DuplicateOf | null = null;
    for (const j of [...candidates].sort((a, b) => a - b)) {
      const similarity = jaccard(set, sets[j]!);
      if (similarity >= opts.threshold && (!best || similarity > best.similarity))
        best = { of: j, similarity };
    }
    // Only originals enter the buckets, so a chain of small edits cannot drift far from its original.
    if (!best)
      for (const key of keys) {
        const bucket = buckets.get(key);
        if (bucket) bucket.push(i);
        else buckets.set(key, [i]);
      }
    return best;
  });
}
