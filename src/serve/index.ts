export { type AgentConfig, AgentRunner, type EpisodeRequest } from "./agent.js";
export { DEFAULT_MAX_BODY_BYTES, type ServeAppOptions, serveApp } from "./app.js";
export { type RunningServer, type ServeOptions, startServe } from "./server.js";
export { ServedTrajectory, ServeMeta, TrajectoryStore } from "./trajectory-store.js";
export type { StepDelta } from "./wire.js";
