import {
  appendFile,
  mkdir,
  readdir,
  readFile,
  readlink,
  rename,
  rm,
  symlink,
  writeFile,
} from "node:fs/promises";
import path from "node:path";
import type { z } from "zod";
import type { Engine } from "../model/index.js";

/** Writes `text` so a reader sees either the old file or the whole new one, never a torn write. */
export async function writeFileAtomic(file: string, text: string): Promise<void> {
  const tmp = `${file}.${process.pid}.tmp`;
  await writeFile(tmp, text);
  await rename(tmp, file);
}

export async function writeJsonAtomic(file: string, value: unknown): Promise<void> {
  await writeFileAtomic(file, `${JSON.stringify(value, null, 2)}\n`);
}

export async function readJson<T>(file: string, schema: z.ZodType<T>): Promise<T> {
  const text = await readFile(file, "utf8");
  const parsed = schema.safeParse(JSON.parse(text));
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    throw new Error(`${file}: field ${issue.path.join(".") || "(root)"}: ${issue.message}`);
  }
  return parsed.data;
}

/** Per-step metrics, one JSON object a line, each with a 0-based `step`. */
export class MetricsLog {
  constructor(readonly file: string) {}

  async append(record: { step: number } & Record<string, unknown>): Promise<void> {
    await appendFile(this.file, `${JSON.stringify(record)}\n`);
  }

  async read(): Promise<Array<{ step: number } & Record<string, number>>> {
    let text: string;
    try {
      text = await readFile(this.file, "utf8");
    } catch {
      return [];
    }
    return text
      .split("\n")
      .filter((l) => l.trim())
      .map((l) => JSON.parse(l));
  }

  /** Drops records of steps >= `step`: after a resume those steps run again, and are logged once. */
  async truncateFrom(step: number): Promise<void> {
    const kept = (await this.read()).filter((r) => r.step < step);
    await writeFileAtomic(this.file, kept.map((r) => `${JSON.stringify(r)}\n`).join(""));
  }
}

/** The engine's checkpoint calls, as the trainers need them. */
export type CheckpointClient = Pick<Engine, "saveCheckpoint" | "loadCheckpoint">;

export const STATE_FILE = "train-state.json";
export const LAST_LINK = "last";
/** One line per step in every training run folder (RL's lines: `RlStepMetrics`). */
export const METRICS_FILE = "metrics.jsonl";

/**
 * Checkpoints under <run>/checkpoints/step-NNNNNN, each holding the engine's files plus the
 * trainer state (train-state.json). A checkpoint is written under a temporary name and renamed
 * when complete; <run>/last is then swapped atomically to point at it.
 */
export class Checkpoints {
  readonly dir: string;

  constructor(
    readonly runDir: string,
    private readonly keep: number,
  ) {
    this.dir = path.join(runDir, "checkpoints");
  }

  async save(client: CheckpointClient, step: number, state: unknown): Promise<string> {
    await mkdir(this.dir, { recursive: true });
    const name = `step-${String(step).padStart(6, "0")}`;
    const final = path.join(this.dir, name);
    const tmp = `${final}.partial`;
    await rm(tmp, { recursive: true, force: true });
    await mkdir(tmp, { recursive: true });
    await client.saveCheckpoint(path.resolve(tmp));
    await writeJsonAtomic(path.join(tmp, STATE_FILE), state);
    await rm(final, { recursive: true, force: true });
    await rename(tmp, final);
    const link = path.join(this.runDir, LAST_LINK);
    const linkTmp = `${link}.tmp`;
    await rm(linkTmp, { force: true });
    await symlink(path.join("checkpoints", name), linkTmp);
    await rename(linkTmp, link);
    await this.prune(name);
    return final;
  }

  /** The newest complete checkpoint (what `last` points at), or null for a fresh run. */
  async latest(): Promise<string | null> {
    try {
      const target = await readlink(path.join(this.runDir, LAST_LINK));
      return path.resolve(this.runDir, target);
    } catch {
      return null;
    }
  }

  private async prune(newest: string): Promise<void> {
    const names = (await readdir(this.dir)).filter((n) => /^step-\d+$/.test(n) && n !== newest).sort();
    const drop = names.slice(0, Math.max(0, names.length - (this.keep - 1)));
    for (const n of drop) await rm(path.join(this.dir, n), { recursive: true, force: true });
  }
}
