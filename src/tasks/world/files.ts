import { readFile } from "node:fs/promises";
import path from "node:path";
import type { z } from "zod";
import { WORLD_MANIFEST_FILE, WorldManifest } from "./generate.js";

export function readWorldManifest(dir: string): Promise<WorldManifest> {
  return readJsonFile(path.join(dir, WORLD_MANIFEST_FILE), WorldManifest);
}

/** A JSON file checked against its schema; errors name the file and the first bad field. */
export async function readJsonFile<T>(file: string, schema: z.ZodType<T>): Promise<T> {
  let raw: unknown;
  try {
    raw = JSON.parse(await readFile(file, "utf8"));
  } catch (err) {
    throw new Error(`${file}: ${(err as Error).message}`);
  }
  const parsed = schema.safeParse(raw);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    throw new Error(`${file}: field "${issue.path.join(".")}": ${issue.message}`);
  }
  return parsed.data;
}
