import type { Context } from "hono";
import type { ContentfulStatusCode } from "hono/utils/http-status";

/** The `type` values OpenAI's clients know; they pick the exception class a client raises. */
export type ErrorType = "invalid_request_error" | "authentication_error" | "not_found_error" | "server_error";

/**
 * A request that ends in an OpenAI-style error body, `{error: {message, type, param, code}}`, so
 * the official clients raise their own typed errors instead of failing to parse.
 */
export class ApiError extends Error {
  constructor(
    readonly status: ContentfulStatusCode,
    message: string,
    readonly type: ErrorType,
    readonly code: string | null = null,
    readonly param: string | null = null,
  ) {
    super(message);
  }
}

export function errorBody(err: ApiError) {
  return { error: { message: err.message, type: err.type, param: err.param, code: err.code } };
}

export function sendError(c: Context, err: ApiError): Response {
  return c.json(errorBody(err), err.status);
}

/** Anything that is not an ApiError is the server's fault: 500, with the message but no stack. */
export function asApiError(err: unknown): ApiError {
  if (err instanceof ApiError) return err;
  const message = err instanceof Error ? err.message : String(err);
  return new ApiError(500, `internal error: ${message}`, "server_error");
}
