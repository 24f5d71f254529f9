import { mkdtemp } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { type GeneratedWorld, generateWorld, type WorldSize, writeWorld } from "../tasks/index.js";
import { CorpusIndex, createToolset } from "../tools/index.js";
import type { Toolbox } from "./episode.js";

export interface WorldFixture {
  dir: string;
  world: GeneratedWorld;
  /** The real tools over the world's corpus: local BM25 search, offline crawl, sandboxed code. */
  tools: Toolbox;
}

/** A generated world written to a temporary folder, with its index built: for tests and benches. */
export async function worldFixture(size: WorldSize = "tiny", seed = 1): Promise<WorldFixture> {
  const dir = await mkdtemp(path.join(tmpdir(), `coa-world-${size}-`));
  const world = generateWorld(seed, size);
  await writeWorld(dir, world);
  const { index } = await CorpusIndex.open(path.join(dir, "corpus.jsonl"));
  const tools = createToolset({ index, search: { provider: "local" }, crawl: { offline: true } });
  return { dir, world, tools };
}
