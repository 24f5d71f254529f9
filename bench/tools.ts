// Tools: BM25 index build/open/query over generated corpora (100,000 documents; with
// COA_BENCH_INDEX_SIZES=1000000,2000000,4000000 also those sizes, and a projection to 21M), in each
// BM25 mode of COA_BENCH_BM25 (default "coa,pyserini"), and the code sandbox's start-to-exit latency
// and CPU (a fresh sandbox per run, and a warm one) and how long 32 sandboxes starting at once pause
// the event loop.
// Corpora are synthetic and deterministic (seeded), in a temp dir.

import { execFileSync } from "node:child_process";
import { createCipheriv, createHash } from "node:crypto";
import { once } from "node:events";
import { createWriteStream } from "node:fs";
import { mkdtemp, readdir, rm, stat } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Bm25Mode, CorpusIndex, defaultIndexDir, probeSandbox, runPython } from "../src/tools/index.js";
import { machineBusy } from "./process-cpu.js";

const DEFAULT_DOCS = 100_000;
const VOCABULARY = 40_000;
const QUERIES = 1_000;

/** A seeded stream of floats in [0, 1): AES-CTR keystream, so every run indexes the same corpus. */
function seededRandom(seed: string): () => number {
  const key = createHash("sha256").update(seed).digest().subarray(0, 16);
  const cipher = createCipheriv("aes-128-ctr", key, Buffer.alloc(16));
  const zeros = Buffer.alloc(1 << 16);
  let block = Buffer.alloc(0);
  let pos = 0;
  return () => {
    if (pos + 4 > block.length) {
      block = cipher.update(zeros);
      pos = 0;
    }
    pos += 4;
    return block.readUInt32LE(pos - 4) / 2 ** 32;
  };
}

const SYLLABLES = "ka to ri mu se na lo vi de ra po shi ten bar gol fen mar dun wil ost ech pra ium ly".split(
  " ",
);

// As in real text, the most frequent words are function words (the indexer drops them as stop words).
const FUNCTION_WORDS = (
  "the of and in to a is was for on as with by at from that it his he which an be this were are had " +
  "her or their its has not also but they have who been she into when after one two there first"
).split(" ");

function vocabulary(rand: () => number): string[] {
  const words = new Set<string>(FUNCTION_WORDS);
  while (words.size < VOCABULARY) {
    const n = 2 + Math.floor(rand() * 3);
    let w = "";
    for (let i = 0; i < n; i++) w += SYLLABLES[Math.floor(rand() * SYLLABLES.length)];
    words.add(w);
  }
  return [...words];
}

/** Word ranks are log-uniform, roughly Zipf's law: a few words are everywhere, most are rare. */
function zipfWord(words: string[], rand: () => number): string {
  return words[Math.floor(Math.exp(rand() * Math.log(words.length))) - 1];
}

const capital = (w: string) => w[0].toUpperCase() + w.slice(1);

interface Article {
  id: string;
  title: string;
  text: string;
  url: string;
}

function article(i: number, words: string[], rand: () => number): Article {
  const title = [0, 1].map(() => capital(words[Math.floor(rand() * words.length)])).join(" ");
  const sentences: string[] = [];
  const count = 4 + Math.floor(rand() * 5);
  for (let s = 0; s < count; s++) {
    const len = 8 + Math.floor(rand() * 9);
    const body = Array.from({ length: len }, () => zipfWord(words, rand));
    if (s === 0 || rand() < 0.3) body.splice(Math.floor(rand() * len), 0, title);
    sentences.push(`${capital(body.join(" "))}.`);
  }
  const id = `doc-${String(i).padStart(7, "0")}`;
  return {
    id,
    title,
    text: sentences.join(" "),
    url: `https://world.local/wiki/${title.replace(/ /g, "_")}`,
  };
}

export async function writeCorpus(path: string, docs = DEFAULT_DOCS): Promise<string[]> {
  const rand = seededRandom("coa bench corpus");
  const words = vocabulary(rand);
  const out = createWriteStream(path);
  const queries: string[] = [];
  for (let i = 0; i < docs; i++) {
    const a = article(i, words, rand);
    if (!out.write(`${JSON.stringify(a)}\n`)) await once(out, "drain");
    // A query names a document's title and two words of its text, as a model asking about it would.
    if (queries.length < QUERIES && i % (docs / QUERIES) === 0) {
      const textWords = a.text.split(" ");
      const pick = () => textWords[Math.floor(rand() * textWords.length)].replace(/\W/g, "");
      queries.push(`${a.title} ${pick()} ${pick()}`);
    }
  }
  out.end();
  await once(out, "finish");
  return queries;
}

export function percentile(sorted: number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))];
}

const ms = (x: number) => `${x.toFixed(2)} ms`;

async function time<T>(fn: () => Promise<T> | T): Promise<[T, number]> {
  const t0 = performance.now();
  const value = await fn();
  return [value, performance.now() - t0];
}

interface IndexRun {
  docs: number;
  bm25: Bm25Mode;
  buildS: number;
  peakRssMiB: number;
  openMs: number;
  diskMiB: number;
  p50: number;
  p99: number;
}

async function dirBytes(dir: string): Promise<number> {
  let total = 0;
  for (const f of await readdir(dir)) total += (await stat(join(dir, f))).size;
  return total;
}

/** Per mode: build (in a child process, for its peak RSS), open, and query one corpus of `docs` documents. */
async function benchIndex(dir: string, docs: number, modes: readonly Bm25Mode[]): Promise<IndexRun[]> {
  const corpus = join(dir, `corpus-${docs}.jsonl`);
  const queries = await writeCorpus(corpus, docs);
  const { size } = await stat(corpus);
  console.log(`corpus: ${docs} docs, ${(size / 2 ** 20).toFixed(1)} MiB (synthetic, seeded)`);
  const runs: IndexRun[] = [];
  for (const bm25 of modes) {
    console.log(`- BM25 ${bm25}:`);
    runs.push(await benchMode(corpus, docs, queries, bm25));
  }
  await rm(corpus);
  return runs;
}

async function benchMode(corpus: string, docs: number, queries: string[], bm25: Bm25Mode): Promise<IndexRun> {
  const child = execFileSync(
    process.execPath,
    ["--import", "tsx", join(import.meta.dirname, "index-build.ts"), corpus, bm25],
    {
      encoding: "utf8",
      maxBuffer: 1 << 20,
    },
  );
  const built = JSON.parse(child.trim().split("\n").at(-1)!) as { buildMs: number; peakRssBytes: number };
  const diskMiB = (await dirBytes(defaultIndexDir(corpus))) / 2 ** 20;
  console.log(
    `index build (read + index + persist): ${(built.buildMs / 1000).toFixed(2)} s, peak RSS ${(built.peakRssBytes / 2 ** 20).toFixed(0)} MiB, on disk ${diskMiB.toFixed(0)} MiB`,
  );
  const [opened, openMs] = await time(() => CorpusIndex.open(corpus));
  console.log(`index open (reused: ${opened.reused}): ${openMs.toFixed(0)} ms`);
  const index = opened.index;

  const first = await time(() => index.rank(queries[0], 10));
  const rankTimes: number[] = [];
  const searchTimes: number[] = [];
  for (const q of queries) {
    rankTimes.push((await time(() => index.rank(q, 10)))[1]);
    searchTimes.push((await time(() => index.search(q, 5)))[1]);
  }
  index.close();
  rankTimes.sort((a, b) => a - b);
  searchTimes.sort((a, b) => a - b);
  const p50 = percentile(rankTimes, 50);
  const p99 = percentile(rankTimes, 99);
  console.log(
    `BM25 query (top 10, ${queries.length} queries, after one first query of ${ms(first[1])}): p50 ${ms(p50)}, p99 ${ms(p99)}, max ${ms(rankTimes.at(-1)!)}`,
  );
  console.log(
    `search with snippets (top 5): p50 ${ms(percentile(searchTimes, 50))}, p99 ${ms(percentile(searchTimes, 99))}`,
  );
  await rm(defaultIndexDir(corpus), { recursive: true, force: true });
  return {
    docs,
    bm25,
    buildS: built.buildMs / 1000,
    peakRssMiB: built.peakRssBytes / 2 ** 20,
    openMs,
    diskMiB,
    p50,
    p99,
  };
}

/** Least-squares line through the runs, evaluated at `docs`. */
function project(runs: IndexRun[], pick: (r: IndexRun) => number, docs: number): number {
  const n = runs.length;
  const mx = runs.reduce((a, r) => a + r.docs, 0) / n;
  const my = runs.reduce((a, r) => a + pick(r), 0) / n;
  const sxy = runs.reduce((a, r) => a + (r.docs - mx) * (pick(r) - my), 0);
  const sxx = runs.reduce((a, r) => a + (r.docs - mx) ** 2, 0);
  const slope = sxx ? sxy / sxx : 0;
  return my + slope * (docs - mx);
}

function printProjection(runs: IndexRun[]): void {
  const target = 21_000_000;
  console.log(
    `projection to ${target} docs, BM25 ${runs[0].bm25} (linear fit through ${runs.map((r) => r.docs).join(", ")}):`,
  );
  console.log(
    `  build ${(project(runs, (r) => r.buildS, target) / 60).toFixed(0)} min, disk ${(project(runs, (r) => r.diskMiB, target) / 1024).toFixed(1)} GiB, open ${project(runs, (r) => r.openMs, target).toFixed(0)} ms, query p50 ${ms(project(runs, (r) => r.p50, target))}, p99 ${ms(project(runs, (r) => r.p99, target))}`,
  );
}

async function benchSandbox(): Promise<void> {
  const runs = 20;
  // A fresh sandbox per run, then warm ones (the default where runs are kept to one process).
  for (const warm of [false, true]) {
    const options = { warm };
    await runPython({ code: "pass", options }); // the probe, and a warm sandbox started
    const times: number[] = [];
    const busyBefore = await machineBusy();
    for (let i = 0; i < runs; i++) {
      const [r, elapsed] = await time(() => runPython({ code: "print(1)", options }));
      if (r.exitCode !== 0 || r.stdout !== "1\n") {
        console.log(`sandbox print(1) failed: exit ${r.exitCode}, ${r.stderr.trim()}`);
        return;
      }
      times.push(elapsed);
    }
    const busyAfter = await machineBusy();
    const cpu =
      busyBefore === null || busyAfter === null
        ? ""
        : `, the machine's CPU ${ms(((busyAfter - busyBefore) * 1000) / runs)} a run`;
    times.sort((a, b) => a - b);
    const kind = warm && (await probeSandbox(options)).warm ? "warm" : "fresh";
    console.log(
      `sandbox print(1) start-to-exit, ${kind}: median ${ms(percentile(times, 50))} over ${runs} runs${cpu}`,
    );
  }
  // An agent runtime starts sandboxes while it serves other episodes: how long its event loop stands
  // still meanwhile (the launcher starts them, so this no longer grows with coa's memory).
  let stall = 0;
  let last = performance.now();
  const tick = setInterval(() => {
    const now = performance.now();
    stall = Math.max(stall, now - last);
    last = now;
  }, 1);
  const burst = () => Promise.all(Array.from({ length: 32 }, () => runPython({ code: "print(1)" })));
  // Twice: warm sandboxes start in the first burst and serve the second.
  const [, together] = await time(burst);
  const [, again] = await time(burst);
  clearInterval(tick);
  const rss = process.memoryUsage().rss / 2 ** 20;
  console.log(
    `sandbox 32 print(1) at once: ${ms(together)}, again ${ms(again)}; the event loop's longest pause ${ms(stall)} (coa's RSS ${rss.toFixed(0)} MB)`,
  );
}

export async function run(): Promise<void> {
  const dir = await mkdtemp(join(tmpdir(), "coa-bench-tools-"));
  const sizes = (process.env.COA_BENCH_INDEX_SIZES ?? "").split(",").filter(Boolean).map(Number);
  const modes = Bm25Mode.array()
    .min(1)
    .parse((process.env.COA_BENCH_BM25 ?? "coa,pyserini").split(",").filter(Boolean));
  try {
    for (const small of await benchIndex(dir, DEFAULT_DOCS, modes)) {
      console.log(`targets (BM25 ${small.bm25}): 100k p99 <= 10 ms: ${small.p99 <= 10 ? "met" : "missed"}`);
    }
    const runs: IndexRun[] = [];
    for (const docs of sizes) {
      console.log();
      for (const run of await benchIndex(dir, docs, modes)) {
        runs.push(run);
        if (docs !== 1_000_000) continue;
        const met = [
          ["build <= 120 s", run.buildS <= 120],
          ["peak RSS <= 1.5 GB", run.peakRssMiB * 2 ** 20 <= 1.5e9],
          ["open <= 1 s", run.openMs <= 1000],
          ["p50 <= 5 ms", run.p50 <= 5],
          ["p99 <= 30 ms", run.p99 <= 30],
        ].map(([what, ok]) => `${what}: ${ok ? "met" : "missed"}`);
        console.log(`targets at 1M (BM25 ${run.bm25}): ${met.join("; ")}`);
      }
    }
    for (const bm25 of modes) {
      const ofMode = runs.filter((r) => r.bm25 === bm25);
      if (ofMode.length >= 2) printProjection(ofMode);
    }
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
  await benchSandbox();
}
