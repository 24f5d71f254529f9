import path from "node:path";
import type { Command } from "commander";
import {
  type CheckpointManifest,
  ENGINE_PRESETS,
  Engine,
  EnginePreset,
  type EngineSource,
  readCheckpointManifest,
  releaseWeights,
} from "../../model/index.js";

/** `coa engine serve`, `info` and `release`: the embedded PyTorch engine from the command line. */
export function register(program: Command): void {
  const engine = program.command("engine").description("the embedded PyTorch model server");

  engine
    .command("serve")
    .description("serve a model on loopback HTTP (OpenAI-compatible /v1/completions, training, checkpoints)")
    .option("--preset <name>", `a fresh model: ${ENGINE_PRESETS.join("|")}`, "tiny")
    .option("--checkpoint <dir>", "load this checkpoint instead of a fresh preset")
    .option("--port <n>", "port on 127.0.0.1 (0 picks a free one)", "0")
    .option("--dtype <dtype>", "auto|fp32|bf16 (auto times both at start)", "auto")
    .option("--device <device>", "auto|cpu|cuda (auto: a CUDA GPU when torch sees one; or $COA_DEVICE)")
    .option("--threads <n>", "torch threads, and OpenBLAS's own where it has a pool (default: all CPUs)")
    .option(
      "--generation-threads <n>",
      "the same while generating (default: --threads minus one, at least 1; a lone row's step takes all of --threads)",
    )
    .option(
      "--draft-tokens <n>",
      "speculative decoding: ids drafted per row and step from earlier text; the same ids come out in " +
        "fewer steps (default 4, or $COA_DRAFT_TOKENS; 0 turns it off)",
    )
    .option("--log-requests", "log every request")
    .action(async (opts: ServeOptions) => {
      const served = await serve(opts);
      process.stdout.write(`${served.engine.baseUrl}\n`);
      process.stderr.write(
        `coa engine: ${served.engine.name} at ${served.engine.baseUrl} (pid ${served.engine.pid}); Ctrl-C stops it\n`,
      );
      await served.stopped;
    });

  engine
    .command("info")
    .description("describe a saved engine checkpoint (reads its manifest; no Python needed)")
    .argument("<checkpoint>", "checkpoint folder")
    .option("--json", "print the manifest as JSON")
    .action(async (dir: string, opts: { json?: boolean }) => {
      const manifest = await readCheckpointManifest(dir);
      process.stdout.write(
        opts.json ? `${JSON.stringify(manifest, null, 2)}\n` : describeCheckpoint(dir, manifest),
      );
    });
  registerRelease(engine);
}

function registerRelease(engine: Command): void {
  engine
    .command("release")
    .description(
      "copy a checkpoint's weights and manifest without optimizer state: a base model to ship or start from",
    )
    .argument("<checkpoint>", "checkpoint folder (e.g. runs/base/last)")
    .requiredOption("--out <dir>", "folder to write")
    .action(async (dir: string, opts: { out: string }) => {
      const manifest = await releaseWeights(dir, opts.out);
      process.stdout.write(
        `released ${manifest.params.toLocaleString("en-US")} parameters (step ${manifest.step}) to ${opts.out}\n`,
      );
    });
}

interface ServeOptions {
  preset: string;
  checkpoint?: string;
  port: string;
  dtype: string;
  device?: string;
  threads?: string;
  generationThreads?: string;
  draftTokens?: string;
  logRequests?: boolean;
}

/** A count flag's value: a whole number of at least `min` (1: a positive integer), or undefined when not given. */
function countFlag(value: string | undefined, flag: string, min = 1): number | undefined {
  if (value === undefined) return undefined;
  const n = Number(value);
  if (!(Number.isInteger(n) && n >= min))
    throw new Error(
      `${flag} must be ${min === 1 ? "a positive integer" : `a whole number >= ${min}`}, got ${value}`,
    );
  return n;
}

/** Starts the engine and resolves `stopped` once SIGINT or SIGTERM has shut it down. */
async function serve(opts: ServeOptions): Promise<{ engine: Engine; stopped: Promise<void> }> {
  const preset = EnginePreset.safeParse(opts.preset);
  if (!preset.success)
    throw new Error(`--preset must be one of ${ENGINE_PRESETS.join(", ")}, got ${opts.preset}`);
  const port = Number(opts.port);
  if (!Number.isInteger(port) || port < 0 || port > 65535)
    throw new Error(`--port must be 0..65535, got ${opts.port}`);
  const dtype = opts.dtype;
  if (dtype !== "auto" && dtype !== "fp32" && dtype !== "bf16")
    throw new Error(`--dtype must be auto, fp32 or bf16, got ${dtype}`);
  const device = opts.device;
  if (device !== undefined && device !== "auto" && device !== "cpu" && device !== "cuda")
    throw new Error(`--device must be auto, cpu or cuda, got ${device}`);
  const threads = countFlag(opts.threads, "--threads");
  const generationThreads = countFlag(opts.generationThreads, "--generation-threads");
  const draftTokens = countFlag(opts.draftTokens, "--draft-tokens", 0);
  const source: EngineSource = opts.checkpoint ? { checkpoint: opts.checkpoint } : { preset: preset.data };
  const engine = await Engine.start(source, {
    port,
    dtype,
    device,
    threads,
    generationThreads,
    draftTokens,
    logRequests: opts.logRequests,
  });
  const stopped = new Promise<void>((resolve) => {
    const stop = () => {
      process.off("SIGINT", stop);
      process.off("SIGTERM", stop);
      engine.close().then(resolve);
    };
    process.on("SIGINT", stop);
    process.on("SIGTERM", stop);
  });
  return { engine, stopped };
}

/** A few readable lines about a checkpoint. */
export function describeCheckpoint(dir: string, m: CheckpointManifest): string {
  const shape = m.model
    ? `dim ${m.model.dim}, ${m.model.n_layers} layers, ${m.model.n_heads} heads, context ${m.model.max_seq_len}`
    : (m.hf_model ?? "");
  const lines = [
    `checkpoint  ${path.resolve(dir)}`,
    `model       ${m.backend === "hf" ? `hf ${m.hf_model}` : (m.preset ?? "custom")} — ${(m.params / 1e6).toFixed(2)}M params; ${shape}`,
    `tokenizer   ${m.tokenizer.name}${m.tokenizer.tags ? ` (${m.tokenizer.tags.length} tag tokens)` : ""}`,
    `step        ${m.step}`,
    `optimizer   ${Object.entries(m.optimizer)
      .map(([k, v]) => `${k}=${v}`)
      .join(" ")}`,
    `saved       ${m.saved_at}${m.dtype ? ` (trained in ${m.dtype})` : ""}`,
    `files       ${Object.entries(m.files)
      .map(([k, v]) => `${k}: ${v}`)
      .join(", ")}`,
  ];
  return `${lines.join("\n")}\n`;
}
