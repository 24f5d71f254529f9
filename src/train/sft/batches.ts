import { deriveSeed, shuffled } from "../seeds.js";

/** How many shuffled examples are sorted by length together before packing (the bucket window). */
const BUCKET_WINDOW = 64;

/**
 * Splits example indices into a training set and a held-out eval slice, as a function of the seed:
 * the same data and seed always hold out the same examples.
 */
export function splitHoldout(
  count: number,
  evalFraction: number,
  seed: number,
  maxEval: number,
): { train: number[]; eval: number[] } {
  const order = shuffled(
    Array.from({ length: count }, (_, i) => i),
    deriveSeed(seed, "holdout"),
  );
  const wanted = evalFraction > 0 ? Math.max(1, Math.floor(count * evalFraction)) : 0;
  const evalCount = count < 2 ? 0 : Math.min(maxEval, wanted);
  return { eval: order.slice(0, evalCount).sort((a, b) => a - b), train: order.slice(evalCount) };
}

/**
 * Micro-batches of one epoch, each a list of indices into `lengths`. Examples are shuffled, sorted
 * by length within windows so a batch holds similar lengths (little padding), packed while
 * (longest × count) stays within `batchTokens`, then the batches are shuffled. A pure function of
 * (lengths, batchTokens, seed, epoch), which is what makes resume exact.
 */
export function epochBatches(
  ids: readonly number[],
  lengths: readonly number[],
  opts: { batchTokens: number; seed: number; epoch: number },
): number[][] {
  const order = shuffled(ids, deriveSeed(opts.seed, "order", opts.epoch));
  const batches: number[][] = [];
  for (let w = 0; w < order.length; w += BUCKET_WINDOW) {
    const window = order.slice(w, w + BUCKET_WINDOW).sort((a, b) => lengths[a] - lengths[b] || a - b);
    batches.push(...packInOrder(window, lengths, opts.batchTokens));
  }
  return shuffled(batches, deriveSeed(opts.seed, "batches", opts.epoch));
}

/** Packs `ids` in the given order while (longest × count) stays within `batchTokens`. */
export function packInOrder(
  ids: readonly number[],
  lengths: readonly number[],
  batchTokens: number,
): number[][] {
  const batches: number[][] = [];
  let batch: number[] = [];
  let longest = 0;
  for (const i of ids) {
    const nextLongest = Math.max(longest, lengths[i]);
    if (batch.length && nextLongest * (batch.length + 1) > batchTokens) {
      batches.push(batch);
      batch = [];
    }
    batch.push(i);
    longest = batch.length === 1 ? lengths[i] : nextLongest;
  }
  if (batch.length) batches.push(batch);
  return batches;
}
