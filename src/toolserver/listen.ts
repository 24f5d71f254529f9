import { hostAllowed, hostForm, listenOn } from "../server/index.js";
import { type Route, type ToolServerConfig, toolServerApp } from "./app.js";

export interface ListenOptions {
  host: string;
  /** 0 picks a free port. */
  port: number;
  routes: readonly Route[];
}

export interface RunningToolServer {
  url: string;
  port: number;
  routes: readonly Route[];
  close(): Promise<void>;
}

/** Serves `routes` on one listener; the Host check learns the port once it is bound, before any request. */
export async function startToolServer(
  cfg: ToolServerConfig,
  opts: ListenOptions,
): Promise<RunningToolServer> {
  let allowHost: (header: string | undefined) => boolean = () => false;
  const app = toolServerApp(cfg, opts.routes, (h) => allowHost(h));
  const { server, port } = await listenOn(app.fetch, opts.host, opts.port);
  allowHost = hostAllowed(opts.host, port);
  return {
    url: `http://${hostForm(opts.host)}:${port}`,
    port,
    routes: opts.routes,
    close: () =>
      new Promise<void>((resolve, reject) => {
        // Keep-alive connections from benchmark or trainer clients would hold close() open.
        (server as unknown as { closeAllConnections?: () => void }).closeAllConnections?.();
        server.close((err) => (err ? reject(err) : resolve()));
      }),
  };
}

/**
 * The ports AFM's scripts and verl's configs expect: the retrieval server on 8000 (which also takes the
 * routes AFM has no server for), the crawl server on 9000, the Serper cache on 9001.
 */
export const AFM_PORTS: ReadonlyArray<{ port: number; routes: readonly Route[] }> = [
  { port: 8000, routes: ["retrieve", "run_code", "score", "mcp"] },
  { port: 9000, routes: ["crawl_page"] },
  { port: 9001, routes: ["search"] },
];

/** One listener per AFM port; if any fails to bind, those already bound are closed again. */
export async function startAfmServers(cfg: ToolServerConfig, host: string): Promise<RunningToolServer[]> {
  const started: RunningToolServer[] = [];
  try {
    for (const { port, routes } of AFM_PORTS)
      started.push(await startToolServer(cfg, { host, port, routes }));
    return started;
  } catch (err) {
    await Promise.all(started.map((s) => s.close()));
    throw err;
  }
}
