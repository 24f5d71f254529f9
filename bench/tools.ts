// Tools: BM25 index build/load/query over a generated 100,000-document corpus, and the code sandbox's
// start-to-exit latency. The corpus is synthetic and deterministic (seeded), written to a temp dir.

import { createCipheriv, createHash } from "node:crypto";
import { once } from "node:events";
import { createWriteStream } from "node:fs";
import { mkdtemp, rm, stat } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { CorpusIndex, runPython } from "../src/tools/index.js";

const DOCS = 100_000;
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
  const id = `doc-${String(i).padStart(6, "0")}`;
  return {
    id,
    title,
    text: sentences.join(" "),
    url: `https://world.local/wiki/${title.replace(/ /g, "_")}`,
  };
}

export async function writeCorpus(path: string): Promise<string[]> {
  const rand = seededRandom("coa bench corpus");
  const words = vocabulary(rand);
  const out = createWriteStream(path);
  const queries: string[] = [];
  for (let i = 0; i < DOCS; i++) {
    const a = article(i, words, rand);
    if (!out.write(`${JSON.stringify(a)}\n`)) await once(out, "drain");
    // A query names a document's title and two words of its text, as a model asking about it would.
    if (queries.length < QUERIES && i % (DOCS / QUERIES) === 0) {
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

async function benchIndex(dir: string): Promise<void> {
  const corpus = join(dir, "corpus.jsonl");
  const queries = await writeCorpus(corpus);
  const { size } = await stat(corpus);
  console.log(`corpus: ${DOCS} docs, ${(size / 2 ** 20).toFixed(1)} MiB (synthetic, seeded)`);

  const [built, buildMs] = await time(() => CorpusIndex.open(corpus));
  console.log(`index build (read + index + persist): ${(buildMs / 1000).toFixed(2)} s`);
  const [loaded, loadMs] = await time(() => CorpusIndex.open(corpus));
  console.log(`index load (reused: ${loaded.reused}): ${(loadMs / 1000).toFixed(2)} s`);
  const index = loaded.index;
  void built;

  const rankTimes: number[] = [];
  const searchTimes: number[] = [];
  for (const q of queries) {
    rankTimes.push((await time(() => index.rank(q, 5)))[1]);
    searchTimes.push((await time(() => index.search(q, 5)))[1]);
  }
  rankTimes.sort((a, b) => a - b);
  searchTimes.sort((a, b) => a - b);
  console.log(
    `BM25 query (top 5, ${queries.length} queries): p50 ${ms(percentile(rankTimes, 50))}, p99 ${ms(percentile(rankTimes, 99))} (target p50 < 5 ms)`,
  );
  console.log(
    `search with snippets (reads 5 rows): p50 ${ms(percentile(searchTimes, 50))}, p99 ${ms(percentile(searchTimes, 99))}`,
  );
}

async function benchSandbox(): Promise<void> {
  const runs = 10;
  const times: number[] = [];
  for (let i = 0; i < runs; i++) {
    const [r, elapsed] = await time(() => runPython({ code: "print(1)" }));
    if (r.exitCode !== 0 || r.stdout !== "1\n") {
      console.log(`sandbox print(1) failed: exit ${r.exitCode}, ${r.stderr.trim()}`);
      return;
    }
    times.push(elapsed);
  }
  times.sort((a, b) => a - b);
  console.log(`sandbox print(1) start-to-exit: median ${ms(percentile(times, 50))} over ${runs} runs`);
}

export async function run(): Promise<void> {
  const dir = await mkdtemp(join(tmpdir(), "coa-bench-tools-"));
  try {
    await benchIndex(dir);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
  await benchSandbox();
}
