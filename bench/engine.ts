// The embedded engine per preset: training tokens/s and MFU (model FLOP/s over this machine's matmul
// FLOP/s, measured in the same run with the same torch), generation tokens/s at batch 1 and 32, and
// the engine's peak resident memory.
import { execFile } from "node:child_process";
import { readFile } from "node:fs/promises";
import { promisify } from "node:util";
import {
  ENGINE_PRESETS,
  Engine,
  type EngineInfo,
  type EnginePreset,
  findPython,
} from "../src/model/index.js";

const exec = promisify(execFile);

// Best square-matmul rate over a few sizes, on the engine's device: the ceiling MFU is measured against.
const PEAK_SCRIPT = `
import json, sys, time, torch
torch.set_num_threads(int(sys.argv[1]))
dtype = {"fp32": torch.float32, "bf16": torch.bfloat16}[sys.argv[2]]
device = sys.argv[3]
sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
best = 0.0
for n in (2048, 4096, 8192) if device == "cuda" else (512, 1024, 2048):
    a, b = torch.randn(n, n, device=device).to(dtype), torch.randn(n, n, device=device).to(dtype)
    a @ b
    reps = max(2, int((3e12 if device == "cuda" else 3e9) / (2 * n**3)))
    for _ in range(3):
        sync()
        t = time.perf_counter()
        for _ in range(reps):
            a @ b
        sync()
        best = max(best, 2 * n**3 * reps / (time.perf_counter() - t))
print(json.dumps({"flops": best}))
`;

// The best read rate on the given threads over a buffer of the given bytes (a vectorized sum over it,
// repeated): a decode step of one row reads every weight once, so this bounds batch-1 decoding.
const READ_SCRIPT = `
import json, sys, time, torch
torch.set_num_threads(int(sys.argv[2]))
x = torch.ones(int(sys.argv[1]) // 4)
x.sum()
reps, best = max(3, int(2e9 // (4 * x.numel()))), 0.0
for _ in range(3):
    t = time.perf_counter()
    for _ in range(reps):
        x.sum()
    best = max(best, 4 * x.numel() * reps / (time.perf_counter() - t))
print(json.dumps({"bytes_per_s": best}))
`;

/** Training shape per preset: rows × length per step, timed steps after one warm-up step. */
const TRAIN: Record<EnginePreset, { rows: number; length: number; steps: number }> = {
  micro: { rows: 8, length: 256, steps: 3 },
  tiny: { rows: 8, length: 512, steps: 3 },
  small: { rows: 4, length: 512, steps: 3 },
};
const GEN_TOKENS: Record<EnginePreset, number> = { micro: 256, tiny: 128, small: 64 };

/** Runs one of the scripts above with torch's interpreter and parses the JSON it prints. */
async function runScript<T>(script: string, args: string[]): Promise<T> {
  const { python } = await findPython();
  const { stdout } = await exec(python, ["-c", script, ...args], { timeout: 300_000 });
  return JSON.parse(stdout) as T;
}

async function peakFlops(info: EngineInfo): Promise<number> {
  const args = [String(info.threads), info.dtype, info.device];
  return (await runScript<{ flops: number }>(PEAK_SCRIPT, args)).flops;
}

async function readRate(bytes: number, threads: number): Promise<number> {
  return (await runScript<{ bytes_per_s: number }>(READ_SCRIPT, [String(bytes), String(threads)]))
    .bytes_per_s;
}

/**
 * What reading `params` weights of `dtype` once a token allows a lone row, at one thread's read rate
 * and, where the engine has more, at all of its threads' (on which a lone row's native step runs).
 */
async function readBound(params: number, threads: number, dtype: "fp32" | "bf16"): Promise<string> {
  const weightBytes = (dtype === "bf16" ? 2 : 4) * params;
  const tokensPerS = async (n: number) => fmt((await readRate(weightBytes, n)) / weightBytes);
  const allThreads = threads > 1 ? `, ${await tokensPerS(threads)} at ${threads} threads'` : "";
  return (
    ` (reading its ${fmt(weightBytes / 1e6)} MB of ${dtype} weights once a token allows ` +
    `${await tokensPerS(1)} at one thread's read rate${allThreads})`
  );
}

function randomIds(n: number, vocab: number, seed: number): number[] {
  let s = seed;
  return Array.from({ length: n }, () => {
    s = (s * 1103515245 + 12345) % 2 ** 31;
    return 3 + (s % (vocab - 3));
  });
}

/** Model FLOPs per trained token (PaLM's count): 6N for the weights, 12·layers·dim·context for attention. */
function trainFlopsPerToken(info: EngineInfo, length: number): number {
  const { n_layers = 0, dim = 0 } = info.config ?? {};
  return 6 * info.params + 12 * n_layers * dim * length;
}

async function trainRate(engine: Engine, info: EngineInfo, preset: EnginePreset) {
  const { rows, length, steps } = TRAIN[preset];
  const batch = Array.from({ length: rows }, (_, i) => ({
    input_ids: randomIds(length, info.tokenizer.vocab_size, i + 1),
    loss_mask: [0, ...Array(length - 1).fill(1)],
  }));
  const micro_batch_tokens = rows * length;
  await engine.trainSft({ batch, micro_batch_tokens });
  // Best step: other work on a shared machine only ever slows a step down.
  let best = Number.POSITIVE_INFINITY;
  for (let i = 0; i < steps; i++) {
    const start = performance.now();
    await engine.trainSft({ batch, micro_batch_tokens });
    best = Math.min(best, (performance.now() - start) / 1000);
  }
  const tokensPerS = (rows * length) / best;
  return { tokensPerS, flops: tokensPerS * trainFlopsPerToken(info, length), shape: `${rows}×${length}` };
}

async function generate(engine: Engine, body: Record<string, unknown>): Promise<number> {
  const res = await fetch(`${engine.baseUrl}/completions`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ model: engine.name, temperature: 1, ignore_eos: true, ...body }),
  });
  if (!res.ok) throw new Error(`completion failed: ${res.status} ${await res.text()}`);
  return ((await res.json()) as { usage: { completion_tokens: number } }).usage.completion_tokens;
}

async function genRates(engine: Engine, preset: EnginePreset) {
  const max_tokens = GEN_TOKENS[preset];
  const prompt = randomIds(32, 256, 7);
  await generate(engine, { prompt, max_tokens: 8, seed: 0 });
  const timed = async (fn: () => Promise<number>) => {
    const start = performance.now();
    const tokens = await fn();
    return tokens / ((performance.now() - start) / 1000);
  };
  // 32 separate requests at once: the engine merges them into one batch. The first such round pays
  // once for what a running server has already done (new connections, first-time kernel shapes); the
  // second shows the steady state an evaluation runs in. Its prompts and seeds are new: a repeat of the
  // first round's would replay its text, which the engine's drafts (speculative decoding) learned.
  const concurrent = (round: number) =>
    timed(async () => {
      const counts = await Promise.all(
        Array.from({ length: 32 }, (_, i) =>
          generate(engine, {
            prompt: randomIds(24 + i, 256, 32 * round + i),
            max_tokens,
            seed: 32 * round + i,
          }),
        ),
      );
      return counts.reduce((a, b) => a + b, 0);
    });
  // Batch 1: the median of three lone requests, each with its own prompt and seed (a repeat would replay
  // text the drafts learned). One request lasts a fraction of a second, and a single one moved by half
  // between two runs of the same engine on a lent Xeon (1,056 and 1,527 tok/s; docs/engine.md).
  const lone: number[] = [];
  for (let k = 0; k < 3; k++) {
    lone.push(
      await timed(() => generate(engine, { prompt: randomIds(32, 256, 8 + k), max_tokens, seed: 101 + k })),
    );
  }
  return {
    batch1: lone.sort((a, b) => a - b)[1],
    batch32: await timed(() => generate(engine, { prompt, max_tokens, n: 32, seed: 2 })),
    concurrent32: await concurrent(0),
    concurrent32Again: await concurrent(1),
  };
}

async function peakRssMb(pid: number | undefined): Promise<string> {
  try {
    const status = await readFile(`/proc/${pid}/status`, "utf8");
    const kb = Number(/VmHWM:\s+(\d+) kB/.exec(status)?.[1]);
    return `${(kb / 1024).toFixed(0)} MB`;
  } catch {
    return "n/a";
  }
}

const fmt = (x: number) => (x >= 100 ? x.toFixed(0) : x.toPrecision(3));

export async function run(): Promise<void> {
  const presets = (process.env.COA_BENCH_ENGINE_PRESETS?.split(",") ?? ENGINE_PRESETS) as EnginePreset[];
  // Pins the arithmetic (fp32 | bf16) so two runs on a busy machine, whose start-up timing may choose
  // differently, compare like with like; default: the engine's own choice.
  const dtype = process.env.COA_BENCH_ENGINE_DTYPE as "fp32" | "bf16" | undefined;
  let peak = 0;
  for (const preset of presets) {
    const engine = await Engine.start({ preset }, { onLog: () => {}, ...(dtype ? { dtype } : {}) });
    try {
      const info = await engine.info();
      if (preset === presets[0]) {
        const startup = Object.entries(info.matmul_gflops).map(([k, v]) => `${k} ${v} GFLOP/s`);
        console.log(
          `engine: torch ${info.torch}, ${info.device}, ${info.dtype}${dtype ? " (pinned by COA_BENCH_ENGINE_DTYPE)" : ""} ` +
            `(start-up test: ${startup.join(", ") || "skipped"}${info.matmul_remembered ? `, remembered from ${info.matmul_measured_at}` : ""}), ${info.threads} threads${info.cpu_quota ? ` (CPU quota ${info.cpu_quota})` : ""}, ` +
            `malloc ${info.malloc?.tuned ? "tuned" : "glibc defaults"}${info.malloc?.hugetlb ? ` (hugetlb ${info.malloc.hugetlb})` : ""}` +
            (info.blas?.openblas_pool
              ? `, OpenBLAS pool beside OpenMP (spin ${info.blas.openmp_spin ?? "default"})`
              : "") +
            (info.decode_attention
              ? `, decode attention ${info.decode_attention.fused ? `fused (${info.decode_attention.threads} threads)${info.decode_attention.sgemm ? ", fp32 steps native through sgemm" : ""}${info.dtype === "bf16" && info.decode_attention.bf16_pairs ? ", bf16 steps native in AVX512-BF16 pairs" : ""}` : `in torch ops (${info.decode_attention.reason})`}`
              : ""),
        );
      }
      // Measured around each training run, keeping the best, so a busy moment cannot deflate the
      // peak and inflate MFU.
      peak = Math.max(peak, await peakFlops(info));
      const train = await trainRate(engine, info, preset);
      peak = Math.max(peak, await peakFlops(info));
      const gen = await genRates(engine, preset);
      const after = await engine.info();
      const { drafted_tokens: drafted = 0, accepted_tokens: accepted = 0 } = after.counters;
      const graphs = after.cuda_graphs
        ? ` | CUDA graphs ${after.cuda_graphs.enabled ? "on" : `off${after.cuda_graphs.failed ? ` (${after.cuda_graphs.failed})` : ""}`}: ` +
          `${after.cuda_graphs.captures} captured, ${after.cuda_graphs.replays} steps replayed`
        : "";
      // Batch steps that took every thread while the client waited (engine/coa_engine/spare_cores.py).
      const spare = after.spare_cores?.steps
        ? `; ${after.spare_cores.steps_on_every_thread} of ${after.spare_cores.steps} batch steps on every thread`
        : "";
      // A one-row step on a CPU reads the matrices in the engine's dtype where the native step runs
      // (its packed copies, engine/coa_engine/row_step.py), else fp32 ones (RowWeights in model.py). The
      // native step of a lone row reads them on all of the engine's threads (--threads), other steps on one.
      const read = info.dtype === "bf16" && after.decode_attention?.fused ? "bf16" : "fp32";
      const batch1Bound = info.device === "cpu" ? await readBound(info.params, info.threads, read) : "";
      console.log(
        `${preset.padEnd(5)} ${(info.params / 1e6).toFixed(2)}M params | train ${train.shape}: ${fmt(train.tokensPerS)} tok/s, ` +
          `${fmt(train.flops / 1e9)} GFLOP/s, MFU ${((100 * train.flops) / peak).toFixed(1)}% | ` +
          `generate tok/s: batch 1 (median of 3) ${fmt(gen.batch1)}${batch1Bound}, batch 32 (n=32) ${fmt(gen.batch32)}, ` +
          `32 concurrent requests (distinct prompts) ${fmt(gen.concurrent32)} first, ${fmt(gen.concurrent32Again)} again ` +
          `(speculative decoding: ${accepted} of ${drafted} drafted ids accepted${spare})${graphs} | peak RSS ${await peakRssMb(engine.pid)}`,
      );
    } finally {
      await engine.close();
    }
  }
  console.log(
    `MFU = best training step's model FLOP/s (6N + 12·layers·dim·context per token) over the best matmul ` +
      `rate measured in this run, ${fmt(peak / 1e9)} GFLOP/s; target >= 30% on small, AMX and non-AMX alike (issue 18)`,
  );
}
