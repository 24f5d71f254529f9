export { cpuQuota, usableCpus } from "./cpus.js";
export { escapeHtml } from "./html.js";
export { appendJsonl, jsonlLines, jsonlText, readJsonlTolerant, repairJsonlTail } from "./jsonl.js";
export { mean, pct } from "./numbers.js";
export { capitalize, oneLine } from "./text.js";
