import type { AddressInfo } from "node:net";
import { serve } from "@hono/node-server";

/** A listening server, as `@hono/node-server` returns it, and the port it is bound to. */
export interface Listening {
  server: ReturnType<typeof serve>;
  port: number;
}

/**
 * Serves `fetch` on host:port (0: any free port); resolves once bound, rejects with the listen error
 * (a taken port: EADDRINUSE) instead of leaving it to crash the process as an unhandled 'error' event.
 */
export function listenOn(
  fetch: Parameters<typeof serve>[0]["fetch"],
  host: string,
  port: number,
): Promise<Listening> {
  return new Promise((resolve, reject) => {
    const server = serve({ fetch, hostname: host, port }, () => {
      server.off("error", reject);
      resolve({ server, port: (server.address() as AddressInfo).port });
    });
    server.once("error", reject);
  });
}
