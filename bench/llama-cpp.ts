// Issue 18's "measure an alternative runtime for generation", the second one: a fresh `micro` and
// `tiny` written as GGUF files (bench/gguf_export.py, fp32 and bf16 matrices) and run by llama.cpp
// through node-llama-cpp, in this process, on one thread: greedy batch 1 (ids and logprobs against the
// engine's own decode of the same model) and 32 sequences at once (the concurrent round of
// `npm run bench -- engine`), against the engine's decoder on the same shapes in process.
// node-llama-cpp is not a dependency of coa. Installed beside the project with only its CPU binaries
// (85 MB; in the project, npm would also fetch its CUDA and Vulkan builds, 725 MB, and `--omit=optional`
// there would drop the project's own platform binaries):
// `npm install --prefix /tmp/coa-llama --ignore-scripts --omit=optional node-llama-cpp @node-llama-cpp/linux-x64`,
// then `COA_NODE_LLAMA_CPP_PREFIX=/tmp/coa-llama npm run bench -- llama-cpp`.

import { mkdtemp } from "node:fs/promises";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { pythonReference } from "./python-reference.js";

/** What this bench uses of node-llama-cpp's API. */
interface NodeLlamaCpp {
  getLlama(options: { gpu: false; build: "never"; logLevel: "error" }): Promise<Llama>;
}
interface Llama {
  loadModel(options: { modelPath: string }): Promise<Model>;
}
interface Model {
  createContext(options: {
    contextSize: number;
    sequences: number;
    threads: number;
    batchSize: number;
  }): Promise<Context>;
  dispose(): Promise<void>;
}
interface Context {
  getSequence(): Sequence;
  dispose(): Promise<void>;
}
interface Sequence {
  clearHistory(): Promise<void>;
  evaluate(tokens: number[], options: { temperature: number; seed?: number }): AsyncGenerator<number>;
  evaluateWithMetadata(
    tokens: number[],
    metadata: { confidence: true },
    options: { temperature: number },
  ): AsyncGenerator<{ token: number; confidence: number }>;
}

type Arithmetic = "fp32" | "bf16";
/** Each GGUF file's matrices (llama.cpp keeps its KV cache in F16, its default, for both: an F32
 * cache changed no logprob here by more than F16 did and made `tiny` 3x slower). */
const RUNS: { arithmetic: Arithmetic; suffix: string }[] = [
  { arithmetic: "fp32", suffix: ".gguf" },
  { arithmetic: "bf16", suffix: "-bf16.gguf" },
];

interface Reference {
  params: number;
  prompt: number[];
  // The engine's greedy decode in fp32 and in bf16 (autocast): what the F32 and BF16 runs compare with.
  ids: Record<Arithmetic, number[]>;
  logprobs: Record<Arithmetic, number[]>;
  torch_tokens_per_s: Record<Arithmetic, number>;
  torch_batch_tokens_per_s: Record<Arithmetic, number>;
  // The rows decoded at once (the concurrent round of `npm run bench -- engine`) and tokens per row.
  batch_prompts: number[][];
  batch_tokens: number;
}

/** The first `count` tokens a sequence generates after `prompt`, and their rate (timed from the first). */
async function generate(seq: Sequence, prompt: number[], count: number, temperature: number, seed = 0) {
  const ids: number[] = [];
  let started = 0;
  for await (const token of seq.evaluate(prompt, { temperature, seed })) {
    if (!ids.length) started = performance.now();
    ids.push(token);
    if (ids.length > count) break;
  }
  // Timed from the first token to the one after the last kept: `count` tokens' worth of decoding.
  return { ids: ids.slice(0, count), tokensPerS: count / ((performance.now() - started) / 1000) };
}

/** Batch 1, greedy: best rate of three runs, the ids of the last, and the logprobs llama.cpp reports,
 * against the engine's in the same arithmetic. */
async function batchOne(model: Model, ref: { prompt: number[]; ids: number[]; logprobs: number[] }) {
  const context = await model.createContext({
    contextSize: 1024,
    sequences: 1,
    threads: 1,
    batchSize: 64,
  });
  const seq = context.getSequence();
  let best = 0;
  let ids: number[] = [];
  for (let run = 0; run < 4; run++) {
    await seq.clearHistory();
    const out = await generate(seq, ref.prompt, ref.ids.length, 0);
    if (run > 0) best = Math.max(best, out.tokensPerS); // the first run warms up
    ids = out.ids;
  }
  await seq.clearHistory();
  const logprobs: number[] = [];
  for await (const out of seq.evaluateWithMetadata(ref.prompt, { confidence: true }, { temperature: 0 })) {
    logprobs.push(Math.log(out.confidence));
    if (logprobs.length >= ref.ids.length) break;
  }
  await context.dispose();
  const same = ids.every((t, i) => t === ref.ids[i]);
  const diff = Math.max(...logprobs.map((x, i) => Math.abs(x - ref.logprobs[i]!)));
  return { tokensPerS: best, same, diff };
}

/** The reference's batch, one sequence per prompt, temperature 1: best total rate of three rounds. */
async function concurrent(model: Model, ref: Reference) {
  const rows = ref.batch_prompts.length;
  const context = await model.createContext({
    contextSize: rows * 256,
    sequences: rows,
    threads: 1,
    batchSize: 512,
  });
  const seqs = Array.from({ length: rows }, () => context.getSequence());
  let best = 0;
  for (let round = 0; round < 3; round++) {
    await Promise.all(seqs.map((s) => s.clearHistory()));
    const started = performance.now();
    const outs = await Promise.all(
      seqs.map((seq, i) => generate(seq, ref.batch_prompts[i]!, ref.batch_tokens, 1, i)),
    );
    const tokens = outs.reduce((sum, o) => sum + o.ids.length, 0);
    best = Math.max(best, tokens / ((performance.now() - started) / 1000));
  }
  await context.dispose();
  return best;
}

export async function run(): Promise<void> {
  const name = "node-llama-cpp";
  const prefix = process.env.COA_NODE_LLAMA_CPP_PREFIX;
  const entry = prefix ? pathToFileURL(createRequire(join(prefix, "package.json")).resolve(name)).href : name;
  const lib = (await import(entry).catch(() => null)) as NodeLlamaCpp | null;
  if (!lib) {
    console.log(
      `skipped: ${name} is not installed (npm install --prefix DIR --ignore-scripts --omit=optional ${name} ` +
        "@node-llama-cpp/linux-x64, then COA_NODE_LLAMA_CPP_PREFIX=DIR)",
    );
    return;
  }
  const llama = await lib.getLlama({ gpu: false, build: "never", logLevel: "error" });
  const dir = await mkdtemp(join(tmpdir(), "coa-bench-gguf-"));
  for (const preset of ["micro", "tiny"]) {
    const file = join(dir, `${preset}.gguf`);
    const ref = await pythonReference<Reference>("gguf_export.py", [preset, file]);
    const fmt = (x: number) => x.toFixed(0);
    console.log(
      `${preset} ${(ref.params / 1e6).toFixed(2)}M params, tok/s, one thread. engine decoder in process: ` +
        `batch 1 fp32 ${fmt(ref.torch_tokens_per_s.fp32)}, bf16 ${fmt(ref.torch_tokens_per_s.bf16)}; ` +
        `${ref.batch_prompts.length} rows fp32 ${fmt(ref.torch_batch_tokens_per_s.fp32)}, bf16 ${fmt(ref.torch_batch_tokens_per_s.bf16)}`,
    );
    for (const { arithmetic, suffix } of RUNS) {
      const model = await llama.loadModel({ modelPath: file.replace(".gguf", suffix) });
      const one = await batchOne(model, {
        prompt: ref.prompt,
        ids: ref.ids[arithmetic],
        logprobs: ref.logprobs[arithmetic],
      });
      const many = await concurrent(model, ref);
      await model.dispose();
      console.log(
        `  llama.cpp ${arithmetic} matrices: batch 1 ${fmt(one.tokensPerS)} (greedy ids ` +
          `${one.same ? "equal" : "differ"}, max |Δ logprob| ${one.diff.toExponential(1)} against the engine's ` +
          `${arithmetic}); ${ref.batch_prompts.length} sequences at once ${fmt(many)}`,
      );
    }
  }
  console.log("targets (issue 18): tiny ≥ 2,000 tok/s at batch 1, ≥ 10,000 for 32 concurrent requests");
}
