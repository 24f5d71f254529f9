import type { Context } from "hono";
import { withDeadline } from "../tools/index.js";
import { ApiError } from "./errors.js";

const TIMED_OUT = Symbol("timed out");

/**
 * Runs a route's work under the server's per-request limit. Work that outlives it (a hanging tool) is
 * abandoned with a 504 so the caller is answered and the server keeps serving; its signal fires at the
 * limit, or when the client goes away, so a tool that listens stops early.
 */
export async function withinDeadline<T>(
  c: Context,
  timeoutMs: number,
  work: (signal: AbortSignal) => Promise<T>,
): Promise<T> {
  const result = await withDeadline<T | typeof TIMED_OUT>(
    { signal: c.req.raw.signal, timeoutMs },
    0,
    work,
    () => TIMED_OUT,
  );
  if (result === TIMED_OUT)
    throw new ApiError(504, "timeout", `the tool did not answer within ${timeoutMs} ms`);
  return result as T;
}
