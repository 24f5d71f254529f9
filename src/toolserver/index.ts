export { ROUTES, type Route, type ToolServerConfig, toolServerApp } from "./app.js";
export {
  type BackendOptions,
  type CodeRun,
  createBackend,
  type RetrievedDoc,
  type ToolBackend,
} from "./backend.js";
export {
  AFM_PORTS,
  type ListenOptions,
  type RunningToolServer,
  startAfmServers,
  startToolServer,
} from "./listen.js";
export { createMcpServer, type McpOptions } from "./mcp.js";
