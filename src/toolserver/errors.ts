import type { Context, ErrorHandler, NotFoundHandler } from "hono";
import { bodyLimit } from "hono/body-limit";
import type { ContentfulStatusCode } from "hono/utils/http-status";
import type { z } from "zod";

/** A request the server refuses or cannot finish; answered as `{error: {message, type}}` with `status`. */
export class ApiError extends Error {
  override name = "ApiError";
  constructor(
    readonly status: ContentfulStatusCode,
    readonly type: string,
    message: string,
  ) {
    super(message);
  }
}

/** The OpenAI-style error body every route answers failures with, so one client-side check fits all. */
export const errorBody = (type: string, message: string) => ({ error: { message, type } });

/** Refuses bodies over `maxBytes` before anything is parsed. */
export const limitBody = (maxBytes: number) =>
  bodyLimit({
    maxSize: maxBytes,
    onError: (c) =>
      c.json(errorBody("request_too_large", `request body is over the limit of ${maxBytes} bytes`), 413),
  });

/** `path.to.field: message`, the way a caller finds the field to fix. */
function describeIssue(issue: z.core.$ZodIssue): string {
  const where = issue.path.length ? issue.path.join(".") : "body";
  if (issue.code === "unrecognized_keys") return `${where}: unknown field(s) ${issue.keys.join(", ")}`;
  return `${where}: ${issue.message}`;
}

/** The JSON body checked against `schema`; a 400 ApiError says what is wrong with it. */
export async function readBody<S extends z.ZodType>(c: Context, schema: S): Promise<z.infer<S>> {
  let raw: unknown;
  try {
    raw = await c.req.json();
  } catch {
    throw new ApiError(400, "invalid_json", "request body is not valid JSON");
  }
  const parsed = schema.safeParse(raw);
  if (!parsed.success)
    throw new ApiError(400, "invalid_request_error", describeIssue(parsed.error.issues[0]!));
  return parsed.data;
}

/** Known refusals keep their status; anything else is the server's fault and says so without a stack. */
export const onError: ErrorHandler = (err, c) => {
  if (err instanceof ApiError) return c.json(errorBody(err.type, err.message), err.status);
  return c.json(errorBody("server_error", err instanceof Error ? err.message : String(err)), 500);
};

export const notFound: NotFoundHandler = (c) =>
  c.json(errorBody("not_found", `no route ${c.req.method} ${c.req.path} on this server`), 404);
