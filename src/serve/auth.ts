import { createHash, timingSafeEqual } from "node:crypto";
import type { MiddlewareHandler } from "hono";
import { ApiError, sendError } from "./errors.js";

const digest = (s: string) => createHash("sha256").update(s).digest();

/**
 * Requires `Authorization: Bearer <key>`. Keys are compared as hashes in constant time, so neither
 * the comparison's time nor the key's length leaks.
 */
export function bearerAuth(key: string): MiddlewareHandler {
  const expected = digest(key);
  return async (c, next) => {
    const m = /^Bearer\s+(.+)$/i.exec(c.req.header("authorization") ?? "");
    if (m && timingSafeEqual(digest(m[1]!.trim()), expected)) return next();
    return sendError(
      c,
      new ApiError(
        401,
        "missing or wrong API key: send Authorization: Bearer <key>",
        "authentication_error",
        "invalid_api_key",
      ),
    );
  };
}
