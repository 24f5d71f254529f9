export { runAgent } from "./agent.js";
export { trajectoryText } from "./text.js";
export * from "./types.js";
