import type { Command } from "commander";
import { CorpusIndex, defaultIndexDir } from "../../tools/index.js";
import { itemProgress } from "../progress.js";

export interface IndexCorpusFlags {
  out?: string;
  rebuild?: boolean;
}

/** Builds (or reuses) the index of a corpus as `coa index` does; returns the lines it prints. */
export async function indexCorpus(
  corpus: string,
  flags: IndexCorpusFlags,
  print: (line: string) => void,
  tty = false,
): Promise<CorpusIndex> {
  const progress = itemProgress("indexing", { tty, print, every: { parts: 10 }, percent: true });
  const started = performance.now();
  let result: Awaited<ReturnType<typeof CorpusIndex.open>>;
  try {
    result = await CorpusIndex.open(corpus, {
      indexDir: flags.out,
      rebuild: flags.rebuild,
      onProgress: (p) => progress.update(p.bytes, p.totalBytes, `${p.docs} docs`),
    });
  } finally {
    progress.stop();
  }
  const seconds = ((performance.now() - started) / 1000).toFixed(2);
  const { index, reused } = result;
  const dir = flags.out ?? defaultIndexDir(corpus);
  print(
    reused
      ? `reused index ${dir}: ${index.size} docs (corpus unchanged since ${index.manifest.builtAt}), loaded in ${seconds} s`
      : `built index ${dir}: ${index.size} docs in ${seconds} s`,
  );
  return index;
}

export function register(program: Command): void {
  program
    .command("index")
    .description("build the BM25 search index of a JSONL corpus ({id,title,text,url?} per line)")
    .argument("<corpus>", "corpus JSONL file")
    .option("--out <dir>", "index directory (default: <corpus>.index)")
    .option("--rebuild", "rebuild even if the index is up to date")
    .action(async (corpus: string, flags: IndexCorpusFlags) => {
      await indexCorpus(
        corpus,
        flags,
        (line) => process.stdout.write(`${line}\n`),
        process.stderr.isTTY === true,
      );
    });
}
