export { escapeHtml } from "./html.js";
export { appendJsonl, jsonlLines, readJsonlTolerant, repairJsonlTail } from "./jsonl.js";
