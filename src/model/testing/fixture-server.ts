import { createServer, type IncomingMessage, type Server } from "node:http";
import type { AddressInfo } from "node:net";

/** One recorded request. */
export interface FixtureRequest {
  method: string;
  path: string;
  headers: IncomingMessage["headers"];
  body: unknown;
}

/** What the fixture answers: JSON, raw text, or nothing at all (the connection hangs). */
export type FixtureReply =
  | { status?: number; headers?: Record<string, string>; json: unknown }
  | { status?: number; headers?: Record<string, string>; text: string }
  | { hang: true };

export type FixtureHandler = (request: FixtureRequest) => FixtureReply;

/** Serves replies in order, repeating the last one. */
export function inOrder(...replies: FixtureReply[]): FixtureHandler {
  let next = 0;
  return () => replies[Math.min(next++, replies.length - 1)]!;
}

/**
 * A stand-in OpenAI-compatible server on 127.0.0.1 for tests: routes ("POST /v1/completions") map
 * to handlers returning prepared replies, and every request is recorded.
 */
export class FixtureServer {
  readonly requests: FixtureRequest[] = [];
  /** Requests being answered right now, and the most there ever were at once. */
  inFlight = 0;
  maxInFlight = 0;

  private constructor(
    private readonly server: Server,
    readonly url: string,
  ) {}

  static async start(routes: Record<string, FixtureHandler>, delayMs = 0): Promise<FixtureServer> {
    let fixture: FixtureServer | undefined;
    const server = createServer(async (req, res) => {
      const chunks: Buffer[] = [];
      for await (const chunk of req) chunks.push(chunk as Buffer);
      const raw = Buffer.concat(chunks).toString("utf8");
      const request: FixtureRequest = {
        method: req.method ?? "GET",
        path: req.url ?? "/",
        headers: req.headers,
        body: raw ? JSON.parse(raw) : undefined,
      };
      fixture!.requests.push(request);
      const handler = routes[`${request.method} ${request.path}`];
      let reply: FixtureReply;
      try {
        reply = handler
          ? handler(request)
          : { status: 404, json: { error: { message: `no route ${request.method} ${request.path}` } } };
      } catch (err) {
        // A handler that throws answers 500 with its message, rather than leaving the client to time out.
        reply = { status: 500, json: { error: { message: `fixture handler failed: ${String(err)}` } } };
      }
      if ("hang" in reply) return;
      fixture!.inFlight++;
      fixture!.maxInFlight = Math.max(fixture!.maxInFlight, fixture!.inFlight);
      if (delayMs) await new Promise((r) => setTimeout(r, delayMs));
      fixture!.inFlight--;
      res.writeHead(reply.status ?? 200, {
        "content-type": "json" in reply ? "application/json" : "text/plain",
        ...reply.headers,
      });
      res.end("json" in reply ? JSON.stringify(reply.json) : reply.text);
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    const { port } = server.address() as AddressInfo;
    fixture = new FixtureServer(server, `http://127.0.0.1:${port}`);
    return fixture;
  }

  /** The bodies sent to one route. */
  bodies(route: string): unknown[] {
    return this.requests.filter((r) => `${r.method} ${r.path}` === route).map((r) => r.body);
  }

  async close(): Promise<void> {
    this.server.closeAllConnections();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }
}
