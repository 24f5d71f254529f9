import { mkdir, stat, writeFile } from "node:fs/promises";
import path from "node:path";
import { z } from "zod";
import { WorldSize } from "./build.js";
import { readJsonFile } from "./files.js";
import { generateWorld, writeWorld } from "./generate.js";

/**
 * A world set: many generated worlds side by side, each in its own folder with its own corpus, so
 * that a student trained on all of them meets every name only a few times and must learn to read
 * and copy rather than memorise. `worlds.json` lists the members; each is an ordinary world folder.
 */
export const WORLD_SET_FILE = "worlds.json";

export const WorldSetManifest = z.object({
  generator: z.literal("coa-world-set"),
  size: WorldSize,
  maxHops: z.number().int().min(2).max(4),
  /** Member folder names relative to the set folder, with their seeds, in seed order. */
  worlds: z.array(z.object({ seed: z.number().int(), dir: z.string() })).min(1),
});
export type WorldSetManifest = z.infer<typeof WorldSetManifest>;

/** "101-124", "1,5,9" or "101-104,200" → the listed integer seeds, in order, without repeats. */
export function parseSeeds(spec: string): number[] {
  const seeds: number[] = [];
  for (const part of spec.split(",").map((s) => s.trim())) {
    const range = /^(-?\d+)-(-?\d+)$/.exec(part);
    const single = /^-?\d+$/.test(part) ? Number(part) : null;
    if (range) {
      const [from, to] = [Number(range[1]), Number(range[2])];
      if (to < from) throw new Error(`seeds "${spec}": range ${part} runs backwards`);
      if (to - from >= 10_000) throw new Error(`seeds "${spec}": range ${part} is over 10,000 seeds`);
      for (let s = from; s <= to; s++) seeds.push(s);
    } else if (single !== null) seeds.push(single);
    else throw new Error(`seeds "${spec}": "${part}" is neither a seed nor a range like 101-124`);
  }
  return [...new Set(seeds)];
}

export const worldDirName = (seed: number): string => `world-${seed}`;

/** Generates one world per seed under `dir` and writes the set's manifest last. */
export async function writeWorldSet(
  dir: string,
  seeds: readonly number[],
  opts: { size: WorldSize; maxHops: number; onWorld?: (seed: number, done: number) => void },
): Promise<WorldSetManifest> {
  if (seeds.length === 0) throw new Error("a world set needs at least one seed");
  const worlds: WorldSetManifest["worlds"] = [];
  for (const seed of seeds) {
    const member = worldDirName(seed);
    await writeWorld(path.join(dir, member), generateWorld(seed, opts.size, { maxHops: opts.maxHops }));
    worlds.push({ seed, dir: member });
    opts.onWorld?.(seed, worlds.length);
  }
  const manifest: WorldSetManifest = {
    generator: "coa-world-set",
    size: opts.size,
    maxHops: opts.maxHops,
    worlds,
  };
  await mkdir(dir, { recursive: true });
  await writeFile(path.join(dir, WORLD_SET_FILE), `${JSON.stringify(manifest, null, 2)}\n`);
  return manifest;
}

/** True when `dir` holds a world set's manifest. */
export async function isWorldSet(dir: string): Promise<boolean> {
  return (await stat(path.join(dir, WORLD_SET_FILE)).catch(() => null))?.isFile() ?? false;
}

/** The member world folders of a set, as absolute paths with their seeds. */
export async function readWorldSet(dir: string): Promise<{ seed: number; dir: string }[]> {
  const manifest = await readJsonFile(path.join(dir, WORLD_SET_FILE), WorldSetManifest);
  return manifest.worlds.map((w) => ({ seed: w.seed, dir: path.resolve(dir, w.dir) }));
}

/** Round-robin over lists, so the first N items of the result draw evenly from every list. */
export function interleave<T>(lists: readonly (readonly T[])[]): T[] {
  const out: T[] = [];
  const longest = Math.max(0, ...lists.map((l) => l.length));
  for (let i = 0; i < longest; i++) for (const l of lists) if (i < l.length) out.push(l[i]);
  return out;
}
