import { jsonlText } from "../../util/index.js";
import type { Exporter } from "./types.js";

/** The Trajectory records themselves: what the engine's SFT reads (`native.jsonl`). */
export const exportNative: Exporter = ({ trajectories }) => [
  { path: "native.jsonl", content: jsonlText(trajectories), records: trajectories.length },
];
