import { errorMessage, ToolFailure } from "./guard.js";

export const USER_AGENT = "coa-tools/0.1";

/** A non-2xx response as a tool failure: code `http_<status>`. */
export function httpFailure(what: string, res: Response): ToolFailure {
  return new ToolFailure(`http_${res.status}`, `${what} failed: HTTP ${res.status} ${res.statusText}`.trim());
}

/**
 * Calls fetch and turns network errors into `network_error` failures. An abort is rethrown as is, so
 * the tool guard reports it as the timeout or cancellation it is.
 */
export async function fetchOrFail(what: string, url: string, init: RequestInit & { signal: AbortSignal }) {
  try {
    return await fetch(url, init);
  } catch (err) {
    if (init.signal.aborted) throw err;
    const cause = err instanceof Error && err.cause instanceof Error ? `: ${err.cause.message}` : "";
    throw new ToolFailure("network_error", `${what} failed: ${errorMessage(err)}${cause}`);
  }
}
