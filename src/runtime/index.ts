export { runAgent } from "./agent.js";
export { ranToolCalls, trajectoryText } from "./text.js";
export * from "./types.js";
