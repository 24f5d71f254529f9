import { readFile } from "node:fs/promises";
import { z } from "zod";
import { ProfileName } from "../protocol/index.js";

/** Thresholds of the progressive filter; every field has a default, so `{}` is a valid config. */
export const DistillConfig = z
  .object({
    /** The profile the trajectories are rendered for; its system prompt and tag set apply. */
    profile: ProfileName.default("all"),
    correctness: z
      .object({
        /** Keep traces whose reward under the task's scorer is at least this. */
        minReward: z.number().default(1),
      })
      .strict()
      .prefault({}),
    budget: z
      .object({
        maxToolCalls: z.number().int().nonnegative().default(16),
        minToolCalls: z.number().int().nonnegative().default(0),
        /** Keep traces that call the same tool with the same arguments twice. */
        allowRedundantCalls: z.boolean().default(false),
      })
      .strict()
      .prefault({}),
    length: z
      .object({
        /** Prompt plus completion, in the target tokenizer's tokens: the training context. */
        maxTokens: z.number().int().positive().default(8192),
      })
      .strict()
      .prefault({}),
    quality: z
      .object({
        requirePlan: z.boolean().default(true),
        /** A failed tool call or a failed double check must be followed by a reflection. */
        requireReflectionAfterError: z.boolean().default(true),
        /** A passing double check before the answer (profiles with double_check only). */
        requireDoubleCheck: z.boolean().default(true),
      })
      .strict()
      .prefault({}),
    dedup: z
      .object({
        enabled: z.boolean().default(true),
        /** Questions whose word-shingle Jaccard similarity reaches this are near duplicates. */
        threshold: z.number().gt(0).max(1).default(0.8),
        shingleWords: z.number().int().positive().default(3),
        numHashes: z.number().int().positive().default(192),
        /** LSH bands; must divide numHashes. More bands find lower similarities (and cost more checks). */
        bands: z.number().int().positive().default(24),
      })
      .strict()
      .refine((d) => d.numHashes % d.bands === 0, { message: "dedup.bands must divide dedup.numHashes" })
      .prefault({}),
    balance: z
      .object({
        enabled: z.boolean().default(false),
        /** Trajectories with fewer tool calls than this count as easy. */
        easyBelowToolCalls: z.number().int().nonnegative().default(2),
        /** Easy trajectories may make up at most this share of the kept set; hard ones are all kept. */
        maxEasyShare: z.number().min(0).max(1).default(0.3),
      })
      .strict()
      .prefault({}),
  })
  .strict();
export type DistillConfig = z.infer<typeof DistillConfig>;

/** Reads a JSON config file; errors name the file and the offending field. */
export async function loadDistillConfig(file: string): Promise<DistillConfig> {
  let data: unknown;
  try {
    data = JSON.parse(await readFile(file, "utf8"));
  } catch (err) {
    throw new Error(`${file}: not readable JSON (${(err as Error).message})`);
  }
  const parsed = DistillConfig.safeParse(data);
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    throw new Error(`${file}: ${issue.path.join(".") || "(root)"}: ${issue.message}`);
  }
  return parsed.data;
}
