import { hostAllowed, hostForm, listenOn } from "../server/index.js";
import type { AgentRunner } from "./agent.js";
import { serveApp } from "./app.js";

export interface ServeOptions {
  agent: AgentRunner;
  /** Default 127.0.0.1: only this machine can call the agent unless asked otherwise. */
  host?: string;
  /** 0 picks a free port. */
  port?: number;
  apiKey?: string;
  maxBodyBytes?: number;
}

export interface RunningServer {
  /** The base URL clients take: `http://host:port/v1`. */
  url: string;
  close(): Promise<void>;
}

/** Listens with the agent app; resolves once requests can arrive. */
export async function startServe(opts: ServeOptions): Promise<RunningServer> {
  const host = opts.host ?? "127.0.0.1";
  // The port is known once listening, before any request can arrive.
  let allowHost: (header: string | undefined) => boolean = () => false;
  const app = serveApp({
    agent: opts.agent,
    allowHost: (h) => allowHost(h),
    apiKey: opts.apiKey,
    maxBodyBytes: opts.maxBodyBytes,
  });
  const { server, port } = await listenOn(app.fetch, host, opts.port ?? 0);
  allowHost = hostAllowed(host, port);
  return {
    url: `http://${hostForm(host)}:${port}/v1`,
    close: () =>
      new Promise<void>((resolve, reject) => {
        server.close((err) => (err ? reject(err) : resolve()));
        // Open streams would hold close() until their episodes end; their clients are cut instead.
        if ("closeAllConnections" in server) server.closeAllConnections();
      }),
  };
}
