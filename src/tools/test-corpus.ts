import { mkdtemp, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { CorpusDoc } from "./corpus.js";

/** A small made-up world for tool tests: a town, its mayor, its province, a bridge, a village. */
export const WORLD_DOCS: CorpusDoc[] = [
  {
    id: "w1",
    title: "Veltmoor",
    text:
      "Veltmoor is a river town in the province of Arden. It was founded in 1712 by salt traders. " +
      "The town's mayor is Ilse Brandt, elected in 2019. Veltmoor is known for its glass bridge.",
    url: "https://world.local/wiki/Veltmoor",
  },
  {
    id: "w2",
    title: "Ilse Brandt",
    text:
      "Ilse Brandt (born 1970) is a politician from Arden. She has been mayor of Veltmoor since 2019. " +
      "Before that she taught chemistry at the Arden Institute.",
    url: "https://world.local/wiki/Ilse_Brandt",
  },
  {
    id: "w3",
    title: "Arden",
    text: "Arden is a province in the north. Its capital is Kestrel Bay. The province has 14 towns, including Veltmoor and Dunmere.",
    url: "https://world.local/wiki/Arden",
  },
  {
    id: "w4",
    title: "Glass bridge of Veltmoor",
    text: "The glass bridge crosses the river Sable at Veltmoor. It opened in 1899 and is 120 metres long.",
    url: "https://world.local/wiki/Glass_bridge",
  },
  {
    id: "w5",
    title: "Dunmere",
    text: "Dunmere is a mining village in Arden. Its population was 830 in 2020.",
  },
];

/** Writes `docs` as a JSONL corpus in a fresh temp dir; returns the corpus path. */
export async function writeCorpusFile(docs: readonly CorpusDoc[] = WORLD_DOCS): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), "coa-corpus-"));
  const path = join(dir, "corpus.jsonl");
  await writeFile(path, `${docs.map((d) => JSON.stringify(d)).join("\n")}\n`);
  return path;
}
