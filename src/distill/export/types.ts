import type { Tokenizer } from "../../model/index.js";
import type { ProfileName, Trajectory } from "../../protocol/index.js";

/** A task as the traces carry it, for RL data (questions and gold answers, no trajectory). */
export interface TaskRow {
  taskId: string;
  question: string;
  answers: string[];
  source: string;
  taskKind: string;
}

export interface ExportInput {
  trajectories: readonly Trajectory[];
  tasks: readonly TaskRow[];
  tokenizer: Tokenizer;
  /** The profile whose system prompt RL rows carry. */
  profile: ProfileName;
  /** The split name written into RL rows. */
  split: string;
}

/** One output file, relative to the output folder. */
export interface ExportFile {
  path: string;
  content: string | Uint8Array;
  records: number;
}

/** A pure function from records to file contents; the caller writes the files atomically. */
export type Exporter = (input: ExportInput) => ExportFile[];
