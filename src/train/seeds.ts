import { hashString, Rng } from "../tasks/index.js";

/**
 * Every random choice of a run is drawn from a seed derived from (run seed, purpose, epoch/step,
 * index), so a resumed run makes exactly the draws the uninterrupted one made.
 */
export const deriveSeed = (...parts: Array<string | number>): number => hashString(parts.join(":"));

/** A shuffled copy of `items`, determined by `seed`. */
export const shuffled = <T>(items: readonly T[], seed: number): T[] => new Rng(seed).shuffle(items);
