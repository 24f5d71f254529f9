import cliProgress from "cli-progress";
import type { Command } from "commander";
import { type BuildProgress, CorpusIndex, defaultIndexDir } from "../../tools/index.js";

export interface IndexCorpusFlags {
  out?: string;
  rebuild?: boolean;
}

/** Progress for a build: a bar on a TTY, a plain line every 10% otherwise. */
function progressReporter(print: (line: string) => void, tty: boolean) {
  if (tty) {
    const bar = new cliProgress.SingleBar(
      { format: "indexing [{bar}] {percentage}% | {docs} docs | ETA {eta}s", hideCursor: true },
      cliProgress.Presets.shades_classic,
    );
    let started = false;
    return {
      update(p: BuildProgress) {
        if (!started) bar.start(p.totalBytes, 0, { docs: 0 });
        started = true;
        bar.update(p.bytes, { docs: p.docs });
      },
      stop: () => started && bar.stop(),
    };
  }
  let nextTenth = 1;
  return {
    update(p: BuildProgress) {
      const tenths = Math.floor((10 * p.bytes) / Math.max(1, p.totalBytes));
      if (tenths < nextTenth) return;
      nextTenth = tenths + 1;
      print(`indexing: ${tenths * 10}% (${p.docs} docs)`);
    },
    stop: () => {},
  };
}

/** Builds (or reuses) the index of a corpus as `coa index` does; returns the lines it prints. */
export async function indexCorpus(
  corpus: string,
  flags: IndexCorpusFlags,
  print: (line: string) => void,
  tty = false,
): Promise<CorpusIndex> {
  const progress = progressReporter(print, tty);
  const started = performance.now();
  let result: Awaited<ReturnType<typeof CorpusIndex.open>>;
  try {
    result = await CorpusIndex.open(corpus, {
      indexDir: flags.out,
      rebuild: flags.rebuild,
      onProgress: (p) => progress.update(p),
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
