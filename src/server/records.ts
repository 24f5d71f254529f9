import { readdir, stat } from "node:fs/promises";
import path from "node:path";
import { findTokenizers, type Tokenizer } from "../model/index.js";
import { Trajectory } from "../protocol/index.js";
import { MasTrace } from "../teacher/index.js";
import { jsonlLines } from "../util/index.js";

/** One record the viewer can show: a token-exact trajectory or a multi-agent trace. */
export type ViewRecord =
  | { kind: "trajectory"; file: string; line: number; value: Trajectory }
  | { kind: "mas"; file: string; line: number; value: MasTrace };

export interface LoadedRecords {
  records: ViewRecord[];
  files: string[];
  /** Lines that were neither kind, by file, with the first reason seen. */
  skipped: { file: string; count: number; firstReason: string }[];
  /** What the trajectories' ids can be decoded with: bytes, and tokenizer files beside the records. */
  tokenizers: Map<string, Tokenizer>;
}

/** Every .jsonl file under the given paths (files are taken as given), sorted for a stable listing. */
export async function findJsonlFiles(paths: readonly string[]): Promise<string[]> {
  const out: string[] = [];
  const visit = async (p: string): Promise<void> => {
    const s = await stat(p);
    if (s.isFile()) {
      out.push(p);
      return;
    }
    for (const entry of await readdir(p, { withFileTypes: true })) {
      const child = path.join(p, entry.name);
      if (entry.isDirectory()) await visit(child);
      else if (entry.name.endsWith(".jsonl")) out.push(child);
    }
  };
  for (const p of paths) await visit(p);
  return [...new Set(out)].sort();
}

function classify(
  value: unknown,
): { kind: "trajectory"; value: Trajectory } | { kind: "mas"; value: MasTrace } | string {
  const asTrajectory = Trajectory.safeParse(value);
  if (asTrajectory.success) return { kind: "trajectory", value: asTrajectory.data };
  const asTrace = MasTrace.safeParse(value);
  if (asTrace.success) return { kind: "mas", value: asTrace.data };
  const issue = asTrajectory.error.issues[0];
  return `not a trajectory (${issue?.path.join(".") || "record"}: ${issue?.message}) nor a MAS trace`;
}

/** Reads every line of every file; lines that are not records are counted, never fatal. */
export async function loadRecords(paths: readonly string[]): Promise<LoadedRecords> {
  const files = await findJsonlFiles(paths);
  const records: ViewRecord[] = [];
  const skipped: LoadedRecords["skipped"] = [];
  for (const file of files) {
    let count = 0;
    let firstReason = "";
    for await (const { line, text } of jsonlLines(file)) {
      let parsed: unknown;
      try {
        parsed = JSON.parse(text);
      } catch {
        count++;
        firstReason ||= `line ${line}: not JSON`;
        continue;
      }
      const result = classify(parsed);
      if (typeof result === "string") {
        count++;
        firstReason ||= `line ${line}: ${result}`;
      } else {
        records.push({ ...result, file, line } as ViewRecord);
      }
    }
    if (count) skipped.push({ file, count, firstReason });
  }
  return { records, files, skipped, tokenizers: await findTokenizers(files) };
}
