import { stat } from "node:fs/promises";
import path from "node:path";
import { NATIVE_FILE } from "../../distill/index.js";
import { BYTE_TOKENIZER_NAME } from "../../model/index.js";
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
  /** The tokenizers the usable trajectories name (one, in any sound data set). */
  tokenizers: string[];
}

/** The native trajectory file inside a data folder, or the file itself. */
export async function resolveTrajectoryFile(dataPath: string): Promise<string> {
  const info = await stat(dataPath).catch(() => null);
  if (!info) throw new Error(`${dataPath}: no such file or folder`);
  if (info.isFile()) return dataPath;
  const native = path.join(dataPath, NATIVE_FILE);
  if ((await stat(native).catch(() => null))?.isFile()) return native;
  throw new Error(
    `${dataPath}: no native.jsonl (the trajectories written by \`coa distill\`) in this folder`,
  );
}

/**
 * The tokenizer file a fresh model needs for this data: `tokenizer.json` beside the trajectory file
 * (where `coa distill --tokenizer` puts it), or null when the first trajectory uses bytes.
 */
export async function dataTokenizerFile(file: string): Promise<string | null> {
  for await (const { text } of jsonlLines(file)) {
    const name = Trajectory.safeParse(JSON.parse(text.trim() || "null")).data?.tokenizer;
    if (name === undefined) continue;
    if (name === BYTE_TOKENIZER_NAME) return null;
    const candidate = path.join(path.dirname(file), "tokenizer.json");
    if (!(await stat(candidate).catch(() => null))?.isFile())
      throw new Error(
        `${file}: the trajectories use tokenizer "${String(name)}" but ${candidate} does not exist; give the tokenizer file with --tokenizer`,
      );
    return candidate;
  }
  return null;
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
  const out: LoadedSftData = { examples: [], bad: [], dropped: 0, truncated: 0, tokenizers: [] };
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
    if (!out.tokenizers.includes(parsed.data.tokenizer)) out.tokenizers.push(parsed.data.tokenizer);
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
