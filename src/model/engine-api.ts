import { z } from "zod";
import { ENGINE_PRESETS } from "./engine-launch.js";

// The engine's own endpoints (training, scoring, checkpoints, info), as engine/coa_engine/server.py
// serves them. Completions, /tokenize and /detokenize follow vLLM and go through OpenAICompatibleClient.

export const EnginePreset = z.enum(ENGINE_PRESETS);
export type EnginePreset = z.infer<typeof EnginePreset>;

/** One training sequence; `loss_mask[t] = 1` trains the prediction of `input_ids[t]` from what precedes it. */
export interface SftSequence {
  input_ids: number[];
  loss_mask: number[];
}

export interface StepOptions {
  /** Learning rate for this step only; the configured one otherwise. */
  lr?: number;
  /** Bound on rows × padded length per forward pass. */
  micro_batch_tokens?: number;
}

/**
 * Per-token arrays are aligned with input_ids (entries off the mask are ignored) or hold one entry per
 * `loss_mask = 1` position; `advantages` may also be one number for the whole sequence.
 */
export interface PolicySequence extends SftSequence {
  advantages: number | number[];
  /** Sampling-time logprobs; omitted means on-policy (ratio 1). */
  old_logprobs?: number[];
  /** Reference-model logprobs for the KL term; omitted means the engine's own reference snapshot. */
  ref_logprobs?: number[];
}

export interface PolicyStepRequest extends StepOptions {
  batch: PolicySequence[];
  clip_low?: number;
  clip_high?: number;
  agg?: "token-mean" | "seq-mean";
  kl_coef?: number;
  /** Must equal the sampling temperature so logprobs compare with `old_logprobs`. */
  temperature?: number;
}

const StepStats = {
  grad_norm: z.number(),
  lr: z.number(),
  step: z.number().int(),
  tokens_per_s: z.number(),
  /** Tokens with loss_mask = 1 (position 0 excluded). */
  tokens: z.number().int(),
};

export const SftStepResult = z.object({ loss: z.number(), ...StepStats });
export type SftStepResult = z.infer<typeof SftStepResult>;

export const EvalResult = z.object({ loss: z.number(), tokens: z.number().int() });
export type EvalResult = z.infer<typeof EvalResult>;

export const PolicyStepResult = z.object({
  loss: z.number(),
  pg_loss: z.number(),
  /** Mean k3 estimate of KL to the reference; 0 when kl_coef is 0. */
  kl: z.number(),
  /** The same estimate against the sampling policy (old_logprobs). */
  approx_kl: z.number(),
  clip_frac: z.number(),
  entropy: z.number(),
  ...StepStats,
});
export type PolicyStepResult = z.infer<typeof PolicyStepResult>;

export const OptimizerConfig = z.object({
  lr: z.number(),
  beta1: z.number(),
  beta2: z.number(),
  eps: z.number(),
  weight_decay: z.number(),
  grad_clip: z.number(),
  micro_batch_tokens: z.number().int(),
});
export type OptimizerConfig = z.infer<typeof OptimizerConfig>;

export const ScoreResult = z.object({ logprobs: z.array(z.array(z.number().nullable())) });

export const CheckpointSaved = z.object({
  dir: z.string(),
  step: z.number().int(),
  files: z.record(z.string(), z.string()),
});
export type CheckpointSaved = z.infer<typeof CheckpointSaved>;

export const CheckpointLoaded = z.object({
  dir: z.string(),
  step: z.number().int(),
  preset: z.string().nullable(),
  params: z.number().int(),
});
export type CheckpointLoaded = z.infer<typeof CheckpointLoaded>;

export const EngineInfo = z.object({
  backend: z.enum(["coa", "hf"]),
  model: z.string(),
  preset: z.string().nullable(),
  /** The built-in model's shape (dim, n_layers, n_heads, hidden_dim, max_seq_len, …); absent for hf. */
  config: z.record(z.string(), z.number()).optional(),
  params: z.number().int(),
  max_model_len: z.number().int(),
  tokenizer: z.object({ name: z.string(), vocab_size: z.number().int() }),
  device: z.string(),
  dtype: z.string(),
  /** GFLOP/s of the model's projections measured at start-up per dtype (one thread), which decided `dtype`. */
  matmul_gflops: z.record(z.string(), z.number()),
  /** When `matmul_gflops` were timed (ISO 8601; null where the dtype was asked for, not timed), and
   * whether at an earlier start on this machine: a decisive choice is remembered (docs/engine.md). */
  matmul_measured_at: z.string().nullable().optional(),
  matmul_remembered: z.boolean().optional(),
  /** torch threads of training and scoring, and of generation (fewer: the client runs beside it). */
  threads: z.number().int(),
  generation_threads: z.number().int().optional(),
  /** CPUs' worth of time a cgroup quota allows the engine (null: none), which bounds the default `threads` (engine/coa_engine/cpus.py). */
  cpu_quota: z.number().nullable().optional(),
  torch: z.string(),
  /** glibc malloc settings applied at start (engine/coa_engine/allocator.py); absent before them.
   * `hugetlb`: glibc's `glibc.malloc.hugetlb` tunable as the engine was started with it (coa's launcher
   * sets 1; glibc before 2.35 ignores it). */
  malloc: z.object({ tuned: z.boolean(), hugetlb: z.string().nullish() }).passthrough().optional(),
  /** OpenBLAS's own thread pool beside torch's, and libgomp's spin count (engine/coa_engine/blas.py). */
  blas: z.object({ openblas_pool: z.boolean(), openmp_spin: z.string().nullable() }).optional(),
  /** Whether decoding on a CPU (fp32, or bf16 over a bf16 cache) runs the fused attention kernel (engine/coa_engine/attention.c), on how many threads, and if not, why. */
  decode_attention: z
    .object({
      fused: z.boolean(),
      threads: z.number().int().optional(),
      /** fp32 steps of many ids run natively, their products by the system OpenBLAS's sgemm (engine/coa_engine/row_step.py). */
      sgemm: z.boolean().optional(),
      /** bf16 steps multiply by AVX512-BF16's dot products of pairs, and take any number of ids natively, up to 64 on a CPU with AMX (row_step.c's `gemv_pairs`; `model.PAIRS_IDS_BESIDE_AMX`). */
      bf16_pairs: z.boolean().optional(),
      reason: z.string().optional(),
    })
    .optional(),
  /** Native decode steps of a batch, and those that ran on every thread because the cores generation leaves to its client were idle (engine/coa_engine/spare_cores.py; `COA_SPARE_CORES=0` turns it off). */
  spare_cores: z
    .object({ enabled: z.boolean(), steps: z.number().int(), steps_on_every_thread: z.number().int() })
    .optional(),
  /** On a GPU, decode steps replayed from CUDA graphs (engine/coa_engine/graph_step.py): on or not, how often, and why they stopped if a capture failed; null on a CPU, absent before them. */
  cuda_graphs: z
    .object({
      enabled: z.boolean(),
      captures: z.number().int(),
      replays: z.number().int(),
      failed: z.string().nullable(),
    })
    .nullable()
    .optional(),
  checkpoint: z.string().nullable(),
  step: z.number().int(),
  optimizer: OptimizerConfig,
  counters: z.object({
    generated_tokens: z.number().int(),
    /** Decode steps of the running batch; absent from engines before it. */
    decode_steps: z.number().int().optional(),
    generation_seconds: z.number(),
    /** Of generation_seconds, the model thread's on a core (the rest it waited for one, or for the GIL); absent before it. */
    generation_cpu_seconds: z.number().optional(),
    /** Parts of generation_seconds: admitting requests (prefill, merge) and the model's decode steps; absent before them. */
    admit_seconds: z.number().optional(),
    decode_seconds: z.number().optional(),
    /** Speculative decoding: drafted ids fed to the model, and those sampling kept; absent before it. */
    drafted_tokens: z.number().int().optional(),
    accepted_tokens: z.number().int().optional(),
    /** Prompts whose ids (past a prefix-cache hit, if any) a decode step fed beside the batch's (their time is decoding's); absent before it. */
    stepped_prefills: z.number().int().optional(),
    /** Rows that read the prompt prefix the batch's rows share (a system prompt) from one copy; absent before it. */
    shared_prefix_rows: z.number().int().optional(),
    trained_tokens: z.number().int(),
    train_seconds: z.number(),
  }),
  /** KV reuse across the turns of an episode (docs/engine.md); absent from engines before it. */
  prefix_cache: z
    .object({
      enabled: z.boolean(),
      hits: z.number().int(),
      misses: z.number().int(),
      saved_prefill_tokens: z.number().int(),
      prefill_tokens: z.number().int(),
    })
    .passthrough()
    .optional(),
  /** Speculative decoding's drafts (docs/engine.md; what they yield is in `counters`); absent from engines before it. */
  speculation: z
    .object({
      enabled: z.boolean(),
      max_draft_tokens: z.number().int(),
      learned_ngrams: z.number().int(),
    })
    .passthrough()
    .optional(),
  /** The bounds on generation and what is in use (docs/engine.md); absent from engines before them. */
  capacity: z
    .object({
      max_rows: z.number().int(),
      rows_in_flight: z.number().int(),
      queued_rows: z.number().int(),
      max_queued_rows: z.number().int(),
      kv_bytes: z.number().int(),
      /** Null where the backend cannot count its cache's bytes (Hugging Face). */
      max_kv_bytes: z.number().int().nullable(),
      /** Completions refused with 503 because the queue was full. */
      refused: z.number().int(),
    })
    .passthrough()
    .optional(),
  /** The HTTP server's open connections (one handler thread each) against its limit, and the ones
   * refused with 503 past it (docs/engine.md); absent from engines before it. */
  connections: z
    .object({
      open: z.number().int(),
      peak: z.number().int(),
      limit: z.number().int(),
      refused: z.number().int(),
    })
    .optional(),
});
export type EngineInfo = z.infer<typeof EngineInfo>;

/**
 * What the engine's sampler did over `wallSeconds` of a client's run: tokens decoded, the seconds it
 * was busy (idle time is the client's: tools, the agent loop) and how many of them its thread ran on a
 * core, and tokens per decode step, i.e. how full the running batch was.
 */
export function engineLoadLine(counters: EngineInfo["counters"], wallSeconds: number): string {
  const {
    generated_tokens: tokens,
    generation_seconds: busy,
    generation_cpu_seconds: cpu,
    decode_steps: steps,
    admit_seconds: admit,
    decode_seconds: decode,
    drafted_tokens: drafted,
    accepted_tokens: accepted,
    stepped_prefills: stepped,
  } = counters;
  const drafts = drafted ? `, ${accepted ?? 0} of ${drafted} drafted ids accepted` : "";
  const perStep = steps ? `, ${(tokens / steps).toFixed(1)} tokens a decode step${drafts}` : "";
  const parts =
    admit !== undefined && decode !== undefined
      ? `: admitting ${admit.toFixed(1)} s, decoding ${decode.toFixed(1)} s${stepped ? ` (${stepped} prompts' ids among them)` : ""}, sampling ${(busy - admit - decode).toFixed(1)} s`
      : "";
  // Time the busy thread spent waiting for a core: other processes (the client, its tools) held both.
  const onCore = cpu !== undefined && busy ? ` (${cpu.toFixed(1)} s on a core)` : "";
  return (
    `engine: ${tokens} tokens generated in ${busy.toFixed(1)} s busy${onCore} of ${wallSeconds.toFixed(1)} s${parts} ` +
    `(${busy ? (tokens / busy).toFixed(0) : 0} tok/s while busy${perStep})`
  );
}
