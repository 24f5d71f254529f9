import { jsonlText } from "../../util/index.js";
import type { Exporter } from "./types.js";

/** The file of the native export: one `Trajectory` per line, what `coa train sft` reads. */
export const NATIVE_FILE = "native.jsonl";

/** The Trajectory records themselves: what the engine's SFT reads. */
export const exportNative: Exporter = ({ trajectories }) => [
  { path: NATIVE_FILE, content: jsonlText(trajectories), records: trajectories.length },
];
