import { copyFile, mkdir, readFile, writeFile } from "node:fs/promises";
import path from "node:path";
import { z } from "zod";
import { TOKENIZER_FILE } from "./tokenizer-files.js";

/** The manifest engine/coa_engine/checkpoint.py writes last, atomically, in every checkpoint folder. */
export const CHECKPOINT_MANIFEST = "checkpoint.json";

export const CheckpointManifest = z.object({
  format: z.literal("coa-engine-checkpoint-v1"),
  backend: z.enum(["coa", "hf"]),
  preset: z.string().nullish(),
  hf_model: z.string().optional(),
  model: z.record(z.string(), z.number()).optional(),
  tokenizer: z.looseObject({ name: z.string(), tags: z.array(z.string()).optional() }),
  params: z.number().int(),
  step: z.number().int(),
  optimizer: z.record(z.string(), z.number()),
  dtype: z.string().optional(),
  saved_at: z.string(),
  /** Tensor files by role (model, optimizer, reference), relative to the folder. */
  files: z.record(z.string(), z.string()),
});
export type CheckpointManifest = z.infer<typeof CheckpointManifest>;

/** Reads and checks a checkpoint's manifest without starting Python. */
export async function readCheckpointManifest(dir: string): Promise<CheckpointManifest> {
  const file = path.join(dir, CHECKPOINT_MANIFEST);
  let text: string;
  try {
    text = await readFile(file, "utf8");
  } catch {
    throw new Error(
      `${file}: not found; ${dir} is not an engine checkpoint (or its first save never finished)`,
    );
  }
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (err) {
    throw new Error(`${file}: not valid JSON (${(err as Error).message})`);
  }
  const parsed = CheckpointManifest.safeParse(json);
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    throw new Error(`${file}: field ${issue.path.join(".") || "(root)"}: ${issue.message}`);
  }
  return parsed.data;
}

/**
 * Copies a checkpoint's weights and manifest into `out`, leaving out optimizer and reference
 * state: what a released base model needs (a new training run starts fresh optimizer moments), at a
 * third of the size. The engine loads it like any checkpoint. Its vocabulary goes beside it as
 * `tokenizer.json`, so data can be distilled into the base's ids (`coa distill --tokenizer`).
 */
export async function releaseWeights(dir: string, out: string): Promise<CheckpointManifest> {
  const manifest = await readCheckpointManifest(dir);
  const weights = manifest.files.model;
  if (!weights) throw new Error(`${path.join(dir, CHECKPOINT_MANIFEST)}: names no model weights`);
  const released: CheckpointManifest = { ...manifest, files: { model: weights } };
  await mkdir(path.join(out, path.dirname(weights)), { recursive: true });
  await copyFile(path.join(dir, weights), path.join(out, weights));
  await writeFile(path.join(out, CHECKPOINT_MANIFEST), `${JSON.stringify(released, null, 2)}\n`);
  await writeFile(path.join(out, TOKENIZER_FILE), `${JSON.stringify(manifest.tokenizer)}\n`);
  return released;
}
