import { readFile } from "node:fs/promises";
import path from "node:path";
import { WorldManifest } from "./generate.js";

export async function readWorldManifest(dir: string): Promise<WorldManifest> {
  const file = path.join(dir, "world.json");
  let raw: unknown;
  try {
    raw = JSON.parse(await readFile(file, "utf8"));
  } catch (err) {
    throw new Error(`${file}: ${(err as Error).message}`);
  }
  const parsed = WorldManifest.safeParse(raw);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    throw new Error(`${file}: field "${issue.path.join(".")}": ${issue.message}`);
  }
  return parsed.data;
}
