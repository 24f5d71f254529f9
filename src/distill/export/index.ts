import { exportLlamaFactory } from "./llamafactory.js";
import { exportNative } from "./native.js";
import { exportOpenAi } from "./openai.js";
import { exportTrl } from "./trl.js";
import type { Exporter } from "./types.js";
import { exportVerl } from "./verl.js";

export const EXPORT_FORMATS = ["native", "llamafactory", "trl", "openai", "verl"] as const;
export type ExportFormat = (typeof EXPORT_FORMATS)[number];

export const EXPORTERS: Readonly<Record<ExportFormat, Exporter>> = {
  native: exportNative,
  llamafactory: exportLlamaFactory,
  trl: exportTrl,
  openai: exportOpenAi,
  verl: exportVerl,
};

export * from "./llamafactory.js";
export { NATIVE_FILE } from "./native.js";
export * from "./openai.js";
export * from "./trl.js";
export * from "./turns.js";
export * from "./types.js";
export * from "./verl.js";
