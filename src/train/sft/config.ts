import { z } from "zod";

export const SftConfig = z
  .object({
    /** A native trajectory JSONL file, or a folder holding native.jsonl (written by `coa distill`). */
    data: z.string(),
    /** The run folder. */
    out: z.string(),
    /** Epochs over the training slice; ignored when `steps` is given. */
    epochs: z.number().int().positive().default(1),
    /** Total optimizer steps (epochs repeat as needed). */
    steps: z.number().int().positive().optional(),
    lr: z.number().positive().default(3e-4),
    minLrRatio: z.number().min(0).max(1).default(0.1),
    /** Warmup steps as a fraction of all steps. */
    warmupRatio: z.number().min(0).max(1).default(0.03),
    /** Padded tokens per micro-batch (longest sequence × sequences). */
    batchTokens: z.number().int().positive().default(4096),
    /** Longer examples are truncated (keeping the start) or dropped. */
    maxLength: z.number().int().positive().default(1024),
    overlong: z.enum(["truncate", "drop"]).default("truncate"),
    evalFraction: z.number().min(0).max(0.5).default(0.05),
    maxEvalExamples: z.number().int().nonnegative().default(64),
    /** Eval loss every this many steps, and at the end. 0 turns eval off. */
    evalEvery: z.number().int().nonnegative().default(50),
    checkpointEvery: z.number().int().positive().default(100),
    keepCheckpoints: z.number().int().positive().default(2),
    seed: z.number().int().default(0),
  })
  .refine((c) => c.maxLength <= c.batchTokens, {
    message: "maxLength must not exceed batchTokens (a sequence must fit in a micro-batch)",
    path: ["maxLength"],
  });
export type SftConfig = z.infer<typeof SftConfig>;
export type SftConfigInput = z.input<typeof SftConfig>;
