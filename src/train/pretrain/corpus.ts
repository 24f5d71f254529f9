import { articleTypes, generateWorld, type WorldSize } from "../../tasks/index.js";
import { deriveSeed } from "../seeds.js";
import { numberCopies, type PretrainDoc, worldDocuments } from "./drills.js";
import { applyMix, type Mix } from "./mix.js";

/** The text of a pretraining run, before tokenization. */
export interface PretrainCorpus {
  /** The training worlds' documents in the mix, world by world (the trainer shuffles them). */
  train: PretrainDoc[];
  /** The held-out world's documents in the same mix: `eval_loss`. */
  eval: PretrainDoc[];
  /** The held-out world's lookup and chain drills, whatever the mix: `eval_copy_loss`. */
  copy: PretrainDoc[];
  /** The held-out world's search drills, whatever the mix: `eval_read_loss`. */
  read: PretrainDoc[];
  /** The held-out world's compute drills, only their copied numbers marked: `eval_number_loss`. */
  numbers: PretrainDoc[];
  /** Entity names (article titles) of the training worlds and of the held-out one. */
  names: { train: string[]; eval: string[] };
}

export interface CorpusSpec {
  worlds: { train: readonly number[]; eval: number };
  size: WorldSize;
  maxHops: number;
  mix: Mix;
  seed: number;
}

/**
 * Generates every world of the run and writes its documents. Drills use a world's train split
 * only, so its rl, dev and test questions stay unseen whatever later stages do with the world.
 */
export function pretrainCorpus(
  spec: CorpusSpec,
  onWorld?: (seed: number, done: number, total: number) => void,
): PretrainCorpus {
  const seeds = [...spec.worlds.train, spec.worlds.eval];
  const corpus: PretrainCorpus = {
    train: [],
    eval: [],
    copy: [],
    read: [],
    numbers: [],
    names: { train: [], eval: [] },
  };
  seeds.forEach((seed, i) => {
    const world = generateWorld(seed, spec.size, { maxHops: spec.maxHops });
    const types = articleTypes(seed, spec.size);
    const docs = worldDocuments({ corpus: world.corpus, types, questions: world.splits.train });
    const names = world.corpus.filter((d) => types.has(d.id)).map((d) => d.title);
    const mixed = applyMix(docs, spec.mix, deriveSeed(spec.seed, "mix", seed));
    if (seed === spec.worlds.eval) {
      corpus.eval = mixed;
      corpus.copy = [...docs.lookup, ...docs.chain];
      corpus.read = docs.search;
      corpus.numbers = docs.compute.map(numberCopies);
      corpus.names.eval = names;
    } else {
      corpus.train.push(...mixed);
      corpus.names.train.push(...names);
    }
    onWorld?.(seed, i + 1, seeds.length);
  });
  return corpus;
}
