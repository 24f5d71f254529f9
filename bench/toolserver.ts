// Tool server: `POST /retrieve` (Search-R1's request, one query, top 3 with scores) requests per second
// and latency at concurrency 16, over the same generated 100,000-document corpus as the tools bench.
// Client and server share this process, so the figures include the client's own cost.

import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { CorpusIndex } from "../src/tools/index.js";
import { createBackend, ROUTES, startToolServer } from "../src/toolserver/index.js";
import { percentile, writeCorpus } from "./tools.js";

const CONCURRENCY = 16;
const WARMUP = 200;
const REQUESTS = 5_000;

export async function run(): Promise<void> {
  const dir = await mkdtemp(join(tmpdir(), "coa-bench-toolserver-"));
  try {
    const corpus = join(dir, "corpus.jsonl");
    const queries = await writeCorpus(corpus);
    const { index } = await CorpusIndex.open(corpus);
    const backend = createBackend({ index, codeConcurrency: 1, crawlMaxUrls: 5, crawlMaxChars: 10_000 });
    const cfg = { backend, defaultTopk: 3, timeoutMs: 30_000, maxBodyBytes: 4 * 1024 ** 2 };
    const server = await startToolServer(cfg, { host: "127.0.0.1", port: 0, routes: ROUTES });
    try {
      const url = `${server.url}/retrieve`;
      let next = 0;
      const ask = async () => {
        const q = queries[next++ % queries.length];
        const res = await fetch(url, {
          method: "POST",
          headers: { "content-type": "application/json" },
          body: JSON.stringify({ queries: [q], topk: 3, return_scores: true }),
        });
        if (res.status !== 200) throw new Error(`/retrieve answered ${res.status}: ${await res.text()}`);
        await res.json();
      };
      const load = async (total: number, times: number[]) => {
        let issued = 0;
        const worker = async () => {
          while (issued++ < total) {
            const t0 = performance.now();
            await ask();
            times.push(performance.now() - t0);
          }
        };
        await Promise.all(Array.from({ length: CONCURRENCY }, worker));
      };
      await load(WARMUP, []);
      const times: number[] = [];
      const t0 = performance.now();
      await load(REQUESTS, times);
      const seconds = (performance.now() - t0) / 1000;
      times.sort((a, b) => a - b);
      console.log(
        `/retrieve over HTTP (${index.size} docs, top 3 with scores, concurrency ${CONCURRENCY}, ${REQUESTS} requests): ` +
          `${(REQUESTS / seconds).toFixed(0)} requests/s, p50 ${percentile(times, 50).toFixed(2)} ms, p99 ${percentile(times, 99).toFixed(2)} ms`,
      );
    } finally {
      await server.close();
    }
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}
