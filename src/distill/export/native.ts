import type { Exporter } from "./types.js";
import { jsonl } from "./types.js";

/** The Trajectory records themselves: what the engine's SFT reads (`native.jsonl`). */
export const exportNative: Exporter = ({ trajectories }) => [
  { path: "native.jsonl", content: jsonl(trajectories), records: trajectories.length },
];
