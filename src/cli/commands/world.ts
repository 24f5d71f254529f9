import type { Command } from "commander";
import {
  formatStats,
  generateWorld,
  loadTasks,
  readWorldManifest,
  SPLITS,
  type Split,
  type SplitStats,
  splitStats,
  WorldSize,
  writeWorld,
} from "../../tasks/index.js";

export function register(program: Command): void {
  const world = program
    .command("world")
    .description("generate and inspect a synthetic encyclopedic world of tasks");

  world
    .command("generate")
    .description("write corpus.jsonl, tasks/{train,rl,dev,test}.jsonl and world.json; same seed, same bytes")
    .option("--seed <n>", "random seed", "1")
    .option("--size <size>", `world size (${WorldSize.options.join(", ")})`, "small")
    .option("--max-hops <n>", "the most lookups a question may need (2 to 4)", "4")
    .requiredOption("--out <dir>", "output directory")
    .action(async (opts: { seed: string; size: string; maxHops: string; out: string }) => {
      const seed = Number(opts.seed);
      if (!Number.isInteger(seed)) throw new Error(`--seed: expected an integer, got "${opts.seed}"`);
      const size = WorldSize.safeParse(opts.size);
      if (!size.success)
        throw new Error(`--size: expected one of ${WorldSize.options.join(", ")}, got "${opts.size}"`);
      const maxHops = Number(opts.maxHops);
      if (!Number.isInteger(maxHops) || maxHops < 2 || maxHops > 4)
        throw new Error(`--max-hops: expected 2, 3 or 4, got "${opts.maxHops}"`);
      const generated = generateWorld(seed, size.data, { maxHops });
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
