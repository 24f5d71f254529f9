// Child process of the tools bench: builds the index of one corpus in one BM25 mode and prints, as one JSON line, the
// build time and this process's peak RSS (which a parent cannot read of its child in Node).
import { Bm25Mode, CorpusIndex } from "../src/tools/index.js";

const corpus = process.argv[2];
const bm25 = Bm25Mode.parse(process.argv[3] ?? "coa");
const t0 = performance.now();
const { index } = await CorpusIndex.open(corpus, { rebuild: true, bm25 });
const buildMs = performance.now() - t0;
index.close();
console.log(
  JSON.stringify({ buildMs, peakRssBytes: process.resourceUsage().maxRSS * 1024, docs: index.size }),
);
