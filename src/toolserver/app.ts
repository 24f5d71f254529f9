import { WebStandardStreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/webStandardStreamableHttp.js";
import { Hono } from "hono";
import { hostCheck } from "../server/index.js";
import type { ToolBackend } from "./backend.js";
import { crawlHandler } from "./crawl.js";
import { limitBody, notFound, onError } from "./errors.js";
import { createMcpServer } from "./mcp.js";
import { retrieveHandler } from "./retrieve.js";
import { runCodeHandler } from "./run-code.js";
import { scoreHandler } from "./score.js";
import { searchHandler } from "./search.js";

export const ROUTES = ["retrieve", "search", "crawl_page", "run_code", "score", "mcp"] as const;
export type Route = (typeof ROUTES)[number];

export interface ToolServerConfig {
  backend: ToolBackend;
  /** Documents per query when a `/retrieve` request has no `topk`. */
  defaultTopk: number;
  /** Longest a request may take; a tool still busy then is answered 504 (see withinDeadline). */
  timeoutMs: number;
  maxBodyBytes: number;
}

/**
 * MCP over streamable HTTP, stateless: each POST gets its own server and transport (the SDK refuses to
 * reuse a stateless transport), answered as plain JSON so the server can be closed once it is sent.
 */
function mcpHandler(cfg: ToolServerConfig) {
  return async (req: Request): Promise<Response> => {
    const server = createMcpServer(cfg.backend, cfg);
    const transport = new WebStandardStreamableHTTPServerTransport({ enableJsonResponse: true });
    await server.connect(transport);
    try {
      return await transport.handleRequest(req);
    } finally {
      await server.close();
    }
  };
}

/**
 * The tool server's routes, `routes` of them (all, or one AFM port's share), each under the Host check
 * and body limit, every failure answered as `{error: {message, type}}`.
 */
export function toolServerApp(
  cfg: ToolServerConfig,
  routes: readonly Route[],
  allowHost: (header: string | undefined) => boolean,
): Hono {
  const on = new Set(routes);
  const app = new Hono()
    .use(hostCheck(allowHost))
    .use(limitBody(cfg.maxBodyBytes))
    .get("/health", (c) => c.json({ status: "healthy", timestamp: Date.now() / 1000, routes }));
  if (on.has("retrieve")) app.post("/retrieve", retrieveHandler(cfg.backend, cfg));
  if (on.has("search")) app.post("/search", searchHandler(cfg.backend, cfg));
  if (on.has("crawl_page")) app.post("/crawl_page", crawlHandler(cfg.backend, cfg));
  if (on.has("run_code")) app.post("/run_code", runCodeHandler(cfg.backend, cfg));
  if (on.has("score")) app.post("/score", scoreHandler(cfg.backend, cfg));
  if (on.has("mcp")) {
    const mcp = mcpHandler(cfg);
    app.all("/mcp", (c) => mcp(c.req.raw));
  }
  app.onError(onError);
  app.notFound(notFound);
  return app;
}
