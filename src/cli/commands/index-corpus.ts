import type { Command } from "commander";
import { z } from "zod";
import { Bm25Mode, CorpusIndex, defaultIndexDir } from "../../tools/index.js";
import { parseFlags } from "../flags.js";
import { itemProgress } from "../progress.js";

const IndexCorpusFlags = z.object({
  out: z.string().min(1).optional(),
  rebuild: z.boolean().optional(),
  /** Stop at the first bad row instead of leaving bad rows out and listing them. */
  strict: z.boolean().optional(),
  /** The ranking of a new index (or of a rebuilt one, when it names another than the index has). */
  bm25: Bm25Mode.optional(),
});
export type IndexCorpusFlags = z.input<typeof IndexCorpusFlags>;

const CORPUS_HELP =
  "corpus file: JSONL ({id,title,text,url?} or Search-R1 {id,contents}) or DPR TSV (id, text, title), optionally .gz";

/** Builds (or reuses, or brings up to date) the index of a corpus as `coa index` does. */
export async function indexCorpus(
  corpus: string,
  flags: IndexCorpusFlags,
  print: (line: string) => void,
  tty = false,
): Promise<CorpusIndex> {
  const { out, rebuild, strict, bm25 } = parseFlags(IndexCorpusFlags, flags);
  const progress = itemProgress("indexing", { tty, print, every: { parts: 10 }, percent: true });
  const started = performance.now();
  let firstDocs: number | undefined;
  let result: Awaited<ReturnType<typeof CorpusIndex.open>>;
  try {
    result = await CorpusIndex.open(corpus, {
      indexDir: out,
      rebuild,
      bm25,
      badRows: strict ? "fail" : "skip",
      onProgress: (p) => {
        firstDocs ??= p.docs;
        const rate = (p.docs - firstDocs) / ((performance.now() - started) / 1000 || 1);
        const skipped = p.skipped ? `, ${p.skipped} bad rows left out` : "";
        progress.update(p.bytes, p.totalBytes, `${p.docs} docs, ${Math.round(rate)} docs/s${skipped}`);
      },
    });
  } finally {
    progress.stop();
  }
  const seconds = ((performance.now() - started) / 1000).toFixed(2);
  const { index, reused, continued, added } = result;
  const dir = out ?? defaultIndexDir(corpus);
  const { skipped } = index.manifest;
  print(
    reused
      ? `reused index ${dir}: ${index.size} docs, BM25 ${index.manifest.bm25} (corpus unchanged since ${index.manifest.builtAt}), loaded in ${seconds} s`
      : `${continued ? "updated" : "built"} index ${dir}: ${index.size} docs${continued ? ` (${added} added)` : ""}, BM25 ${index.manifest.bm25}, in ${seconds} s`,
  );
  if (skipped.count > 0) {
    print(
      `${skipped.count} bad rows left out${skipped.count > skipped.examples.length ? `; the first ${skipped.examples.length}` : ""}:`,
    );
    for (const message of skipped.examples) print(`  ${message}`);
  }
  return index;
}

export function register(program: Command): void {
  program
    .command("index")
    .description("build the BM25 search index of a corpus (resumes an interrupted build, adds appended rows)")
    .argument("<corpus>", CORPUS_HELP)
    .option("--out <dir>", "index directory (default: <corpus>.index)")
    .option("--rebuild", "rebuild even if the index is up to date")
    .option("--strict", "stop at the first bad row instead of leaving bad rows out and listing them")
    .option(
      "--bm25 <mode>",
      "ranking: coa (minisearch's BM25+, title boosted: what coa's base model learned; the default for a new index) | pyserini (k1 0.9, b 0.4 over title and text, as Search-R1 corpora are searched); naming another mode than the index has rebuilds it",
    )
    .action(async (corpus: string, flags: IndexCorpusFlags) => {
      await indexCorpus(
        corpus,
        flags,
        (line) => process.stdout.write(`${line}\n`),
        process.stderr.isTTY === true,
      );
    });
}
