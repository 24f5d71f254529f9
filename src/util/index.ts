export { appendJsonl, readJsonlTolerant, repairJsonlTail } from "./jsonl.js";
