import path from "node:path";
import type { EnginePreset } from "./engine-api.js";
import { EngineProcess } from "./engine-process.js";
import { engineRoot, pythonCandidates, startWithPython } from "./engine-python.js";

// The engine's launch alone: what `coa` needs to start it before anything else loads (zod, the
// protocol, the HTTP clients: ~0.3 s of a CLI's start), so it imports none of them (`./launch/`).

export const ENGINE_PRESETS = ["micro", "tiny", "small"] as const;

/** What the engine serves: a fresh preset, a saved checkpoint, or a Hugging Face model (needs transformers). */
export type EngineSource = { preset: EnginePreset } | { checkpoint: string } | { hfModel: string };

export interface EngineOptions {
  /** Loopback port; 0 (default) takes a free one. */
  port?: number;
  /** Python to run; default: COA_PYTHON, then /usr/bin/python3, python3, python (the first with torch). */
  python?: string;
  /** Arithmetic: `auto` (default) times fp32 and bf16 matmuls at start and takes the faster. */
  dtype?: "auto" | "fp32" | "bf16";
  /** `auto` (default): a CUDA GPU when torch sees one, else the CPU; `$COA_DEVICE` also sets it. */
  device?: "auto" | "cpu" | "cuda";
  /** torch intra-op threads; default: every CPU the process may use. */
  threads?: number;
  /**
   * torch threads while generating; default: `threads` minus one, at least one (the client driving
   * generation runs beside it; on 2 cores one thread evaluates 15–20% faster, docs/engine.md).
   */
  generationThreads?: number;
  /** Seed of a fresh model's weights (default 0, so a preset starts identical every time). */
  seed?: number;
  /** Overrides a preset's context length. */
  maxSeqLen?: number;
  /** A fresh preset's vocabulary: a tokenizer file such as the `tokenizer.json` of `coa distill` (default: bytes). */
  tokenizer?: string;
  /** Rows decoded together at most. */
  maxBatch?: number;
  /** Rows waiting to join the batch at most; a completion past it gets HTTP 503 (default 4 × maxBatch). */
  maxQueue?: number;
  /** Keys and values in memory at most, in MiB: running batch and prefix cache together (default 2048). */
  kvCacheMb?: number;
  /**
   * Speculative decoding: ids drafted per row and step from earlier text (the row's own context, then
   * what finished rows wrote) and checked by the model in the same step. The ids and logprobs sampled
   * are those of one id per step; only the step count falls. Default 4 (`$COA_DRAFT_TOKENS`); 0 turns it
   * off. coa models only (docs/engine.md, "Speculative decoding").
   */
  draftTokens?: number;
  /**
   * Times a completion the engine refused as full (HTTP 503, Retry-After) is sent again before the call
   * fails (default 10). Each wait is the engine's Retry-After or a doubling backoff from 0.5 s, whichever
   * is longer, at most 60 s: about 4 minutes in all.
   */
  busyRetries?: number;
  /** Receives each engine log line; default: written to stderr with an `[engine]` prefix. */
  onLog?: (line: string) => void;
  logRequests?: boolean;
  startTimeoutMs?: number;
  /** Limit for one completion request (default 10 minutes). */
  timeoutMs?: number;
  /** Completion requests in flight at once; the engine batches them together (default 64). */
  concurrency?: number;
}

const defaultLog = (line: string) => process.stderr.write(`[engine] ${line}\n`);

/** The engine's command line for a source and options. */
function engineArgs(source: EngineSource, options: EngineOptions): string[] {
  const args = ["--port", String(options.port ?? 0)];
  if ("preset" in source) args.push("--preset", source.preset);
  else if ("checkpoint" in source) args.push("--checkpoint", path.resolve(source.checkpoint));
  else args.push("--hf-model", source.hfModel);
  if (options.dtype) args.push("--dtype", options.dtype);
  if (options.device) args.push("--device", options.device);
  if (options.threads) args.push("--threads", String(options.threads));
  if (options.generationThreads) args.push("--generation-threads", String(options.generationThreads));
  if (options.seed !== undefined) args.push("--seed", String(options.seed));
  if (options.maxSeqLen) args.push("--max-seq-len", String(options.maxSeqLen));
  if (options.tokenizer) args.push("--tokenizer", path.resolve(options.tokenizer));
  if (options.maxBatch) args.push("--max-batch", String(options.maxBatch));
  if (options.maxQueue) args.push("--max-queue", String(options.maxQueue));
  if (options.kvCacheMb) args.push("--kv-cache-mb", String(options.kvCacheMb));
  if (options.draftTokens !== undefined) args.push("--draft-tokens", String(options.draftTokens));
  if (options.logRequests) args.push("--log-requests");
  return args;
}

/**
 * An engine process on its way up: started by `EngineLaunch.start`, connected to by `Engine.open`, which
 * takes it over. Its start (~2 s, most of it Python importing torch) then overlaps whatever the
 * caller loads meanwhile (`coa eval` loads its tools and tasks). `cancel` stops one nobody opened.
 */
export class EngineLaunch {
  private claimed = false;

  private constructor(
    readonly source: EngineSource,
    readonly options: EngineOptions,
    /** What its process was started with (`StartKey`). */
    private readonly startedWith: StartKey,
    private readonly started: Promise<{ process: EngineProcess; url: string }>,
    private readonly abort: AbortController,
  ) {
    // A failed start is reported to whoever claims it, not as an unhandled rejection before then.
    started.catch(() => {});
  }

  /** Starts the engine process without waiting for it to listen. */
  static start(source: EngineSource, options: EngineOptions = {}): EngineLaunch {
    const abort = new AbortController();
    const log = options.onLog ?? defaultLog;
    // The command line `adopt` compares is the one spawned.
    const key = startKey(source, options);
    const spawnWith = (python: string, onLog = log) =>
      EngineProcess.start({
        python,
        args: key.args,
        root: engineRoot(),
        onLog,
        startTimeoutMs: options.startTimeoutMs ?? 120_000,
        signal: abort.signal,
      });
    const started = (async () =>
      options.python
        ? spawnWith(options.python)
        : startWithPython(pythonCandidates(), spawnWith, log, abort.signal))();
    return new EngineLaunch(source, options, key, started, abort);
  }

  /**
   * This launch, taken over for `options`, where they would have started the same process (the same
   * interpreter, command line, log and start limit; the other options only shape the client that
   * `Engine.open` makes); else undefined, and it stays as it was. The CLI starts its engine before
   * it has parsed its flags this way (`startEarlyLaunch`), then hands it to the command that wants it.
   */
  adopt(source: EngineSource, options: EngineOptions): EngineLaunch | undefined {
    const key = startKey(source, options);
    if (this.claimed || !sameStart(key, this.startedWith)) return undefined;
    this.claimed = true;
    return new EngineLaunch(source, options, key, this.started, this.abort);
  }

  /** The process once it listens, for its one taker (`Engine.open`); rejects as the start failed. */
  claim(): Promise<{ process: EngineProcess; url: string }> {
    if (this.claimed) return Promise.reject(new Error("this engine launch was already opened"));
    this.claimed = true;
    return this.started;
  }

  /**
   * Stops the process unless it was claimed (its Engine stops it then): killed at once while it
   * starts, asked to exit once it listens. Safe to call twice.
   */
  async cancel(): Promise<void> {
    if (this.claimed) return;
    this.claimed = true;
    this.abort.abort();
    const started = await this.started.catch(() => null);
    await started?.process.stop();
  }
}

/** The options that shape an engine's start, as opposed to those of the client `Engine.open` makes. */
interface StartKey {
  args: string[];
  python: EngineOptions["python"];
  onLog: EngineOptions["onLog"];
  startTimeoutMs: EngineOptions["startTimeoutMs"];
}

const startKey = (source: EngineSource, options: EngineOptions): StartKey => ({
  args: engineArgs(source, options),
  python: options.python,
  onLog: options.onLog,
  startTimeoutMs: options.startTimeoutMs,
});

const sameStart = (a: StartKey, b: StartKey): boolean =>
  a.args.join("\0") === b.args.join("\0") &&
  a.python === b.python &&
  a.onLog === b.onLog &&
  a.startTimeoutMs === b.startTimeoutMs;

/** What a `--model` value names. */
export type ModelSpec = { kind: "http"; baseUrl: string } | { kind: "engine"; source: EngineSource };

/**
 * Reads a `--model` value: an http(s) base URL, or the embedded engine as `engine` (the micro
 * preset), `engine:<preset>`, `engine:hf:<hugging-face-model>` or `engine:<checkpoint-dir>`.
 */
export function parseModelSpec(spec: string): ModelSpec {
  if (/^https?:\/\//i.test(spec)) return { kind: "http", baseUrl: spec };
  const engine = /^engine(?::(.+))?$/.exec(spec);
  if (!engine)
    throw new Error(
      `--model must be an http(s) base URL, engine, engine:<preset>, engine:hf:<model> or engine:<checkpoint-dir>; got "${spec}"`,
    );
  const target = engine[1] ?? "micro";
  if (target.startsWith("hf:")) return { kind: "engine", source: { hfModel: target.slice(3) } };
  return {
    kind: "engine",
    source: isPreset(target) ? { preset: target } : { checkpoint: target },
  };
}

const isPreset = (name: string): name is EnginePreset => (ENGINE_PRESETS as readonly string[]).includes(name);
