import { mkdir, writeFile } from "node:fs/promises";
import path from "node:path";
import { z } from "zod";
import { jsonlText } from "../../util/index.js";
import type { Task } from "../task.js";
import { buildWorld, SIZES, type World, WorldSize } from "./build.js";
import { Rng } from "./prng.js";
import { makeProgramQuestion, PROGRAM_NAMES } from "./programs.js";
import { renderArticle, renderMinorSource, renderNews } from "./prose.js";
import { type DraftQuestion, groupQuestions, MAX_HOPS } from "./questions.js";
import type { WorldDoc } from "./schema.js";

/** 2: each split's tasks in a seeded random order (1 listed them group by group, kind by kind). */
export const WORLD_VERSION = 2;
export const SPLITS = ["train", "rl", "dev", "test"] as const;
export const Split = z.enum(SPLITS);
export type Split = z.infer<typeof Split>;

export const WorldManifest = z.object({
  generator: z.literal("coa-world"),
  version: z.number().int().min(1).max(WORLD_VERSION),
  seed: z.number().int(),
  size: WorldSize,
  /** The most lookups a question needs (`coa world generate --max-hops`). */
  maxHops: z.number().int().min(2).max(MAX_HOPS).default(MAX_HOPS),
  heldOutGroups: z.array(z.number().int()),
  counts: z.object({
    entities: z.record(z.string(), z.number().int()),
    documents: z.object({ articles: z.number().int(), pages: z.number().int() }),
    tasks: z.record(Split, z.number().int()),
  }),
});
export type WorldManifest = z.infer<typeof WorldManifest>;

export interface GeneratedWorld {
  manifest: WorldManifest;
  corpus: WorldDoc[];
  splits: Record<Split, Task[]>;
}

/** Split shares for questions outside the held-out groups (the test split gets the held-out groups). */
const SHARES: ReadonlyArray<readonly [Split, number]> = [
  ["train", 0.72],
  ["rl", 0.18],
  ["dev", 0.1],
];
/** Pure computation questions belong to no group, so a slice of them goes to test directly. */
const COMPUTATION_SHARES: ReadonlyArray<readonly [Split, number]> = [
  ["train", 0.62],
  ["rl", 0.18],
  ["dev", 0.1],
  ["test", 0.1],
];

function draw(rng: Rng, shares: ReadonlyArray<readonly [Split, number]>): Split {
  let x = rng.float();
  for (const [split, share] of shares) {
    x -= share;
    if (x < 0) return split;
  }
  return shares.at(-1)![0];
}

function renderCorpus(world: World): WorldDoc[] {
  return [
    ...world.entities.map((e) => renderArticle(world, e)),
    ...world.minorSources.map((m) => renderMinorSource(world, m)),
    ...world.newsEvents.map((id) => renderNews(world, id)),
  ];
}

function toTask(world: World, q: DraftQuestion, id: string): Task {
  return {
    id,
    question: q.question,
    answers: q.answers,
    kind: q.kind,
    source: "world",
    meta: {
      hops: q.hops,
      difficulty: q.difficulty,
      template: q.template,
      group: q.group,
      supportingDocs: q.supportingDocs,
      entities: q.entities,
      distractors: q.distractors,
      plan: q.plan,
      world: { seed: world.seed, size: world.size, version: WORLD_VERSION },
    },
  };
}

/**
 * Builds the world for `seed` and `size`; the same arguments always give the same result.
 * `maxHops` (2 to 4, default 4) caps the lookups of every question: the same entities and corpus,
 * easier questions.
 */
export function generateWorld(
  seed: number,
  size: WorldSize,
  opts: { maxHops?: number } = {},
): GeneratedWorld {
  const maxHops = opts.maxHops ?? MAX_HOPS;
  if (!Number.isInteger(maxHops) || maxHops < 2 || maxHops > MAX_HOPS)
    throw new Error(`maxHops must be a whole number from 2 to ${MAX_HOPS}, got ${maxHops}`);
  const cfg = SIZES[size];
  const world = buildWorld(seed, size);
  const root = new Rng(seed);

  const drafts: DraftQuestion[] = [];
  for (let g = 0; g < cfg.groups; g++)
    drafts.push(...groupQuestions(world, g, cfg.quotas, root.fork(`questions:${g}`), maxHops));
  const programs = root.fork("programs");
  for (let i = 0; i < cfg.computation; i++) {
    const p = makeProgramQuestion(programs, PROGRAM_NAMES[i % PROGRAM_NAMES.length]);
    drafts.push({
      kind: "computation",
      template: `program:${p.name}`,
      question: p.question,
      answers: [p.answer],
      group: null,
      hops: 0,
      plan: { steps: [{ op: "program", name: p.name, params: p.params }] },
      entities: [],
      supportingDocs: [],
      distractors: [],
      difficulty: p.difficulty,
    });
  }

  const splits: Record<Split, Task[]> = { train: [], rl: [], dev: [], test: [] };
  const seen = new Set<string>();
  const heldOut = new Set(world.heldOutGroups);
  const splitRng = root.fork("splits");
  const counters: Record<string, number> = {};
  for (const q of drafts) {
    if (seen.has(q.question)) continue;
    seen.add(q.question);
    const n = counters[q.kind] ?? 0;
    counters[q.kind] = n + 1;
    const id = `w${seed}-${q.kind}-${String(n).padStart(5, "0")}`;
    const split =
      q.group === null
        ? draw(splitRng, COMPUTATION_SHARES)
        : heldOut.has(q.group)
          ? "test"
          : draw(splitRng, SHARES);
    splits[split].push(toTask(world, q, id));
  }
  // Shuffled, so that the first N tasks of a split (`--limit N`) are a fair sample of it.
  const order = root.fork("order");
  for (const split of SPLITS) splits[split] = order.shuffle(splits[split]);

  const corpus = renderCorpus(world);
  const entities: Record<string, number> = {};
  for (const e of world.entities) entities[e.type] = (entities[e.type] ?? 0) + 1;
  const manifest: WorldManifest = {
    generator: "coa-world",
    version: WORLD_VERSION,
    seed,
    size,
    maxHops,
    heldOutGroups: world.heldOutGroups,
    counts: {
      entities,
      documents: { articles: world.entities.length, pages: corpus.length - world.entities.length },
      tasks: {
        train: splits.train.length,
        rl: splits.rl.length,
        dev: splits.dev.length,
        test: splits.test.length,
      },
    },
  };
  return { manifest, corpus, splits };
}

/** A world folder's manifest (`WorldManifest`); its presence is what makes a folder a world. */
export const WORLD_MANIFEST_FILE = "world.json";
/** A world folder's documents, one `WorldDoc` per line: what search and crawl read. */
export const WORLD_CORPUS_FILE = "corpus.jsonl";

/** Writes corpus.jsonl, tasks/{train,rl,dev,test}.jsonl and world.json under `dir`. */
export async function writeWorld(dir: string, world: GeneratedWorld): Promise<void> {
  await mkdir(path.join(dir, "tasks"), { recursive: true });
  await writeFile(path.join(dir, WORLD_CORPUS_FILE), jsonlText(world.corpus));
  for (const split of SPLITS)
    await writeFile(path.join(dir, "tasks", `${split}.jsonl`), jsonlText(world.splits[split]));
  await writeFile(path.join(dir, WORLD_MANIFEST_FILE), `${JSON.stringify(world.manifest, null, 2)}\n`);
}
