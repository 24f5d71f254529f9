import { statSync } from "node:fs";
import type { Command } from "commander";
import { z } from "zod";
import { CorpusIndex } from "../../tools/index.js";
import { clipSnippet } from "../../tools/search-results.js";

const SearchFlags = z.object({ k: z.coerce.number().int().min(1).max(1000).default(10) });
export type SearchFlags = z.input<typeof SearchFlags>;

/**
 * Prints the BM25 hits of `query` (rank, score, id, title, the start of the text): for checking what
 * an agent's search would see. `target` is an index directory, or a corpus whose index is opened
 * (and built or brought up to date first, as `coa index` would).
 */
export async function searchCommand(
  target: string,
  query: string,
  flags: SearchFlags,
  print: (line: string) => void,
): Promise<void> {
  const { k } = SearchFlags.parse(flags);
  const index = statSync(target).isDirectory()
    ? CorpusIndex.openDir(target)
    : (await CorpusIndex.open(target, { badRows: "skip" })).index;
  try {
    const started = performance.now();
    const hits = await index.retrieve(query, k);
    const ms = (performance.now() - started).toFixed(1);
    print(`${hits.length} hits of ${index.size} docs (BM25 ${index.manifest.bm25}) in ${ms} ms`);
    hits.forEach(({ doc, score }, i) => {
      print(
        `${i + 1}. [${score.toFixed(4)}] ${doc.id}  ${doc.title || "(untitled)"}${doc.url ? ` (${doc.url})` : ""}`,
      );
      print(`   ${clipSnippet(doc.text)}`);
    });
  } finally {
    index.close();
  }
}

export function register(program: Command): void {
  program
    .command("search")
    .description("print the BM25 hits of a query in an index or corpus, for debugging")
    .argument("<index-or-corpus>", "index directory (from `coa index`) or corpus file")
    .argument("<query>", "query text")
    .option("--k <n>", "number of hits", "10")
    .action(async (target: string, query: string, flags: SearchFlags) => {
      await searchCommand(target, query, flags, (line) => process.stdout.write(`${line}\n`));
    });
}
