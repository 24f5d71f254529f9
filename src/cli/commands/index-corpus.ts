import type { Command } from "commander";
import { CorpusIndex, defaultIndexDir } from "../../tools/index.js";
import { itemProgress } from "../progress.js";

export interface IndexCorpusFlags {
  out?: string;
  rebuild?: boolean;
  /** Stop at the first bad row instead of leaving bad rows out and listing them. */
  strict?: boolean;
}

const CORPUS_HELP =
  "corpus file: JSONL ({id,title,text,url?} or Search-R1 {id,contents}) or DPR TSV (id, text, title), optionally .gz";

/** Builds (or reuses, or brings up to date) the index of a corpus as `coa index` does. */
export async function indexCorpus(
  corpus: string,
  flags: IndexCorpusFlags,
  print: (line: string) => void,
  tty = false,
): Promise<CorpusIndex> {
  const progress = itemProgress("indexing", { tty, print, every: { parts: 10 }, percent: true });
  const started = performance.now();
  let firstDocs: number | undefined;
  let result: Awaited<ReturnType<typeof CorpusIndex.open>>;
  try {
    result = await CorpusIndex.open(corpus, {
      indexDir: flags.out,
      rebuild: flags.rebuild,
      badRows: flags.strict ? "fail" : "skip",
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
  const dir = flags.out ?? defaultIndexDir(corpus);
  const { skipped } = index.manifest;
  print(
    reused
      ? `reused index ${dir}: ${index.size} docs (corpus unchanged since ${index.manifest.builtAt}), loaded in ${seconds} s`
      : `${continued ? "updated" : "built"} index ${dir}: ${index.size} docs${continued ? ` (${added} added)` : ""} in ${seconds} s`,
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
    .action(async (corpus: string, flags: IndexCorpusFlags) => {
      await indexCorpus(
        corpus,
        flags,
        (line) => process.stdout.write(`${line}\n`),
        process.stderr.isTTY === true,
      );
    });
}
