export { runAgent } from "./agent.js";
export { RunTrajectory, RuntimeMeta } from "./meta.js";
export { ranToolCalls, trajectoryText } from "./text.js";
export * from "./types.js";
