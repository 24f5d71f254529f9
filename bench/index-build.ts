// Child process of the tools bench: builds the index of one corpus and prints, as one JSON line, the
// build time and this process's peak RSS (which a parent cannot read of its child in Node).
import { CorpusIndex } from "../src/tools/index.js";

const corpus = process.argv[2];
const t0 = performance.now();
const { index } = await CorpusIndex.open(corpus, { rebuild: true });
const buildMs = performance.now() - t0;
index.close();
console.log(
  JSON.stringify({ buildMs, peakRssBytes: process.resourceUsage().maxRSS * 1024, docs: index.size }),
);
