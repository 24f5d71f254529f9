// Parser throughput on generated trajectories (every tag, code blocks, long observations), parsed
// one-shot and streamed in small chunks as the runtime feeds generated text; then 1 MiB hostile inputs.
import fc from "fast-check";
import { CoaStreamParser, parseCoa, renderSteps } from "../src/protocol/index.js";
import { trajectoryArb } from "../src/protocol/testing/arbitraries.js";

const TARGET_BYTES = 4_000_000;

function corpus(): string[] {
  const texts: string[] = [];
  let bytes = 0;
  for (let seed = 1; bytes < TARGET_BYTES; seed++) {
    for (const steps of fc.sample(trajectoryArb("all", 12), { numRuns: 200, seed })) {
      const text = renderSteps(steps);
      texts.push(text);
      bytes += Buffer.byteLength(text);
    }
  }
  return texts;
}

/** Best of `rounds` timed passes, in MB/s. */
function throughput(
  texts: string[],
  bytes: number,
  parseAll: (texts: string[]) => number,
  rounds = 5,
): number {
  parseAll(texts); // warm-up
  let best = Number.POSITIVE_INFINITY;
  for (let r = 0; r < rounds; r++) {
    const t0 = performance.now();
    parseAll(texts);
    best = Math.min(best, performance.now() - t0);
  }
  return bytes / 1e6 / (best / 1000);
}

const oneShot = (texts: string[]) => texts.reduce((n, t) => n + parseCoa(t).steps.length, 0);

const streamed = (chunk: number) => (texts: string[]) => {
  let n = 0;
  for (const t of texts) {
    const parser = new CoaStreamParser();
    for (let i = 0; i < t.length; i += chunk) parser.push(t.slice(i, i + chunk));
    n += parser.end().steps.length;
  }
  return n;
};

/** Best of `rounds` timed runs, in ms. */
function bestMs(run: () => unknown, rounds = 3): number {
  run(); // warm-up
  let best = Number.POSITIVE_INFINITY;
  for (let r = 0; r < rounds; r++) {
    const t0 = performance.now();
    run();
    best = Math.min(best, performance.now() - t0);
  }
  return best;
}

const MIB = 1 << 20;

/** Hostile inputs of 1 MiB that made the parser quadratic before issue 22 (both now linear). */
function hostile(): void {
  const letters = `<${"a".repeat(MIB - 1)}`;
  for (const chunk of [4, 16, 64])
    console.log(
      `\`<\` + 1 MiB of letters, ${String(chunk).padStart(2)}-char chunks: ` +
        `${bestMs(() => streamed(chunk)([letters])).toFixed(1)} ms`,
    );
  const pairs = Math.floor((MIB - 30) / "<plan></answer>".length);
  const nested = `<think><answer>${"<plan>".repeat(pairs)}${"</answer>".repeat(pairs)}</think>`;
  console.log(
    `1 MiB of nested open/unmatched close tags, one-shot: ${bestMs(() => oneShot([nested])).toFixed(1)} ms`,
  );
}

export async function run(): Promise<void> {
  const texts = corpus();
  const bytes = texts.reduce((n, t) => n + Buffer.byteLength(t), 0);
  const steps = oneShot(texts);
  console.log(
    `corpus: ${texts.length} trajectories, ${(bytes / 1e6).toFixed(2)} MB, ${steps} steps ` +
      `(mean ${Math.round(bytes / texts.length)} bytes)`,
  );
  console.log(`parseCoa one-shot:           ${throughput(texts, bytes, oneShot).toFixed(1)} MB/s`);
  for (const chunk of [4, 16, 64])
    console.log(
      `CoaStreamParser, ${String(chunk).padStart(2)}-char chunks: ${throughput(texts, bytes, streamed(chunk)).toFixed(1)} MB/s`,
    );
  hostile();
}
