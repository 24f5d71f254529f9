import { stat } from "node:fs/promises";
import path from "node:path";
import { completionIds, lossMask, Trajectory } from "../../protocol/index.js";
import { jsonlLines } from "../../util/index.js";

/** One training sequence: the prompt then the completion, loss only where the model wrote. */
export interface SftExample {
  id: string;
  inputIds: number[];
  lossMask: number[];
}

export interface BadLine {
  file: string;
  line: number;
  message: string;
}

export type OverlongPolicy = "truncate" | "drop";

export interface LoadedSftData {
  examples: SftExample[];
  bad: BadLine[];
  /** Examples dropped for length (policy "drop") or left with no trainable token after truncation. */
  dropped: number;
  truncated: number;
}

/** The native trajectory file inside a data folder, or the file itself. */
export async function resolveTrajectoryFile(dataPath: string): Promise<string> {
  const info = await stat(dataPath).catch(() => null);
  if (!info) throw new Error(`${dataPath}: no such file or folder`);
  if (info.isFile()) return dataPath;
  const native = path.join(dataPath, "native.jsonl");
  if ((await stat(native).catch(() => null))?.isFile()) return native;
  throw new Error(
    `${dataPath}: no native.jsonl (the trajectories written by \`coa distill\`) in this folder`,
  );
}

/** prompt ++ completion with loss 0 on prompt and tool tokens, 1 on model tokens. */
export function toSftExample(t: Pick<Trajectory, "id" | "promptIds" | "segments">): SftExample {
  return {
    id: t.id,
    inputIds: [...t.promptIds, ...completionIds(t)],
    lossMask: [...t.promptIds.map(() => 0), ...lossMask(t)],
  };
}

/** Applies the length limit; null when the example must be dropped. */
export function fitLength(
  ex: SftExample,
  maxLength: number,
  policy: OverlongPolicy,
): { example: SftExample; truncated: boolean } | null {
  if (ex.inputIds.length <= maxLength) return { example: ex, truncated: false };
  if (policy === "drop") return null;
  const cut = { ...ex, inputIds: ex.inputIds.slice(0, maxLength), lossMask: ex.lossMask.slice(0, maxLength) };
  return cut.lossMask.includes(1) ? { example: cut, truncated: true } : null;
}

/**
 * Streams a trajectory JSONL file. A line that is not JSON or not a Trajectory is reported with its
 * line number and skipped; it never stops the run.
 */
export async function loadSftData(
  file: string,
  opts: { maxLength: number; overlong: OverlongPolicy },
): Promise<LoadedSftData> {
  const out: LoadedSftData = { examples: [], bad: [], dropped: 0, truncated: 0 };
  for await (const { line: n, text } of jsonlLines(file)) {
    let json: unknown;
    try {
      json = JSON.parse(text);
    } catch (err) {
      out.bad.push({ file, line: n, message: `not JSON: ${(err as Error).message}` });
      continue;
    }
    const parsed = Trajectory.safeParse(json);
    if (!parsed.success) {
      const issue = parsed.error.issues[0];
      out.bad.push({ file, line: n, message: `field ${issue.path.join(".") || "(root)"}: ${issue.message}` });
      continue;
    }
    const ex = toSftExample(parsed.data);
    if (!ex.lossMask.includes(1)) {
      out.dropped++;
      continue;
    }
    const fitted = fitLength(ex, opts.maxLength, opts.overlong);
    if (!fitted) {
      out.dropped++;
      continue;
    }
    if (fitted.truncated) out.truncated++;
    out.examples.push(fitted.example);
  }
  return out;
}
