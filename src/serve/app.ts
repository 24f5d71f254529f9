import { Hono } from "hono";
import { bodyLimit } from "hono/body-limit";
import type { AgentRunner } from "./agent.js";
import { bearerAuth } from "./auth.js";
import { chatCompletions } from "./chat.js";
import { ApiError, asApiError, sendError } from "./errors.js";

/** A question is short; a megabyte leaves room for long pasted context and stops floods early. */
export const DEFAULT_MAX_BODY_BYTES = 1024 * 1024;

export interface ServeAppOptions {
  agent: AgentRunner;
  /** Judges each request's Host header (src/server hostAllowed): refuses DNS-rebinding pages. */
  allowHost: (header: string | undefined) => boolean;
  /** When set, every /v1 route needs `Authorization: Bearer <apiKey>`. */
  apiKey?: string;
  maxBodyBytes?: number;
}

/** The agent behind OpenAI's routes, plus the trajectory of every reply by its id. */
export function serveApp(opts: ServeAppOptions): Hono {
  const { agent } = opts;
  const maxSize = opts.maxBodyBytes ?? DEFAULT_MAX_BODY_BYTES;
  const app = new Hono();
  app.use(async (c, next) => {
    if (opts.allowHost(c.req.header("host"))) return next();
    return sendError(
      c,
      new ApiError(
        403,
        "the Host header names no address this server listens on (DNS rebinding?)",
        "invalid_request_error",
      ),
    );
  });
  if (opts.apiKey) app.use("/v1/*", bearerAuth(opts.apiKey));
  app.use(
    bodyLimit({
      maxSize,
      onError: (c) =>
        sendError(
          c,
          new ApiError(
            413,
            `the request body is over ${maxSize} bytes`,
            "invalid_request_error",
            "body_too_large",
          ),
        ),
    }),
  );
  app.get("/v1/models", (c) =>
    c.json({ object: "list", data: [{ id: agent.modelName, object: "model", created: 0, owned_by: "coa" }] }),
  );
  app.post("/v1/chat/completions", (c) => chatCompletions(c, agent));
  app.get("/v1/trajectories/:id", async (c) => {
    const id = c.req.param("id");
    const trajectory = await agent.store.get(id);
    if (!trajectory)
      throw new ApiError(
        404,
        `no trajectory for response id "${id}"`,
        "not_found_error",
        "trajectory_not_found",
      );
    return c.json(trajectory);
  });
  app.notFound((c) =>
    sendError(c, new ApiError(404, `no route ${c.req.method} ${c.req.path}`, "not_found_error")),
  );
  app.onError((err, c) => sendError(c, asApiError(err)));
  return app;
}
