import type { Command } from "commander";
import { z } from "zod";
import {
  formatStats,
  generateWorld,
  loadTasks,
  parseSeeds,
  readWorldManifest,
  SPLITS,
  type Split,
  type SplitStats,
  splitStats,
  WorldSize,
  writeWorld,
  writeWorldSet,
} from "../../tasks/index.js";
import { parseFlags } from "../flags.js";

/** The flags of `coa world generate`, checked at the edge. */
export const WorldGenerateFlags = z.object({
  seed: z.coerce.number().int(),
  seeds: z.string().optional(),
  size: WorldSize,
  maxHops: z.coerce.number().int().min(2).max(4),
  out: z.string().min(1),
});

export function register(program: Command): void {
  const world = program
    .command("world")
    .description("generate and inspect a synthetic encyclopedic world of tasks");

  world
    .command("generate")
    .description(
      "write corpus.jsonl, tasks/{train,rl,dev,test}.jsonl and world.json; same seed, same bytes. With --seeds, a world set: one such folder per seed and worlds.json",
    )
    .option("--seed <n>", "random seed", "1")
    .option("--seeds <list>", "a world set instead, one world per seed: 101-124 or 1,5,9")
    .option("--size <size>", `world size (${WorldSize.options.join(", ")})`, "small")
    .option("--max-hops <n>", "the most lookups a question may need (2 to 4)", "4")
    .requiredOption("--out <dir>", "output directory")
    .addHelpText(
      "after",
      "\nExamples:\n  coa world generate --seed 1 --size small --out runs/world\n  coa world generate --seeds 101-124 --size small --max-hops 2 --out runs/worlds   # train on many worlds, test on an unseen one",
    )
    .action(async (raw: Record<string, unknown>) => {
      const opts = parseFlags(WorldGenerateFlags, raw);
      if (opts.seeds !== undefined) {
        const seeds = parseSeeds(opts.seeds);
        await writeWorldSet(opts.out, seeds, {
          size: opts.size,
          maxHops: opts.maxHops,
          onWorld: (s, done) => process.stderr.write(`world ${s} (${done}/${seeds.length})\n`),
        });
        console.log(`wrote ${opts.out}: a set of ${seeds.length} worlds (seeds ${opts.seeds})`);
        return;
      }
      const generated = generateWorld(opts.seed, opts.size, { maxHops: opts.maxHops });
      await writeWorld(opts.out, generated);
      const { documents, tasks } = generated.manifest.counts;
      console.log(
        `wrote ${opts.out}: ${documents.articles} articles + ${documents.pages} pages; tasks ${SPLITS.map((s) => `${s} ${tasks[s]}`).join(", ")}`,
      );
    });

  world
    .command("stats <dir>")
    .description("print the distribution of task kinds, hops and difficulty per split")
    .action(async (dir: string) => {
      console.log(await worldStats(dir));
    });
}

/** What `coa world stats` prints: the manifest line, then kinds, hops and difficulty per split. */
export async function worldStats(dir: string): Promise<string> {
  const manifest = await readWorldManifest(dir);
  const stats: Partial<Record<Split, SplitStats>> = {};
  for (const split of SPLITS) stats[split] = splitStats((await loadTasks(dir, { split })).tasks);
  return [
    `world seed ${manifest.seed}, size ${manifest.size}, max hops ${manifest.maxHops}, version ${manifest.version}; held-out groups ${manifest.heldOutGroups.join(", ")}`,
    formatStats(stats),
  ].join("\n");
}
