import type { Observation, ToolContext } from "./types.js";

/** What a tool's body returns; the guard adds timing and truncation. */
export interface ToolOutcome {
  text: string;
  ok: boolean;
  error?: string;
}

/** A failure a tool body reports on purpose: `code` becomes Observation.error, the message its text. */
export class ToolFailure extends Error {
  override name = "ToolFailure";
  constructor(
    readonly code: string,
    message: string,
  ) {
    super(message);
  }
}

/** Extra time the guard waits past the deadline for a tool that honours the abort signal itself. */
const DEADLINE_GRACE_MS = 500;

/** Cuts `text` to `maxChars`, ending with a marker that says how much was dropped. */
export function truncateText(text: string, maxChars: number): { text: string; truncated: boolean } {
  if (text.length <= maxChars) return { text, truncated: false };
  const marker = (dropped: number) => `\n…[truncated ${dropped} chars]`;
  // The marker eats into the budget; its length depends on the number it prints.
  let keep = Math.max(0, maxChars - marker(text.length).length);
  keep = Math.min(keep, text.length);
  return { text: text.slice(0, keep) + marker(text.length - keep), truncated: true };
}

export function errorMessage(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

/**
 * Runs `body` with a signal that fires when `ctx.signal` does or at `ctx.timeoutMs`. A body still
 * running `graceMs` after that deadline is abandoned and `onTimeout()` becomes the result; with no
 * grace it is abandoned at the deadline itself. Exceptions from the body pass through.
 */
export async function withDeadline<T>(
  ctx: { signal?: AbortSignal; timeoutMs: number },
  graceMs: number,
  body: (signal: AbortSignal) => Promise<T>,
  onTimeout: () => T,
): Promise<T> {
  const controller = new AbortController();
  const onAbort = () => controller.abort(ctx.signal?.reason);
  if (ctx.signal?.aborted) onAbort();
  ctx.signal?.addEventListener("abort", onAbort, { once: true });
  const timers: NodeJS.Timeout[] = [];
  const abandoned = new Promise<T>((resolve) => {
    const giveUp = () => resolve(onTimeout());
    timers.push(
      setTimeout(() => {
        controller.abort(new Error("timeout"));
        if (graceMs <= 0) giveUp();
      }, ctx.timeoutMs),
    );
    if (graceMs > 0) timers.push(setTimeout(giveUp, ctx.timeoutMs + graceMs));
  });
  try {
    return await Promise.race([body(controller.signal), abandoned]);
  } finally {
    for (const timer of timers) clearTimeout(timer);
    ctx.signal?.removeEventListener("abort", onAbort);
  }
}

/**
 * Runs a tool body under the context's deadline and abort signal and turns whatever happens into an
 * Observation: never throws. The body gets a signal that fires at the deadline; a body that ignores
 * it is abandoned shortly after and reported as a timeout.
 */
export async function guardTool(
  ctx: ToolContext,
  body: (signal: AbortSignal) => Promise<ToolOutcome>,
): Promise<Observation> {
  const started = performance.now();
  const outcome = await withDeadline(
    ctx,
    DEADLINE_GRACE_MS,
    async (signal) => {
      try {
        return await body(signal);
      } catch (err) {
        if (signal.aborted) return abortedOutcome(ctx);
        if (err instanceof ToolFailure) return { ok: false, error: err.code, text: err.message };
        return { ok: false, error: "tool_error", text: `Tool failed: ${errorMessage(err)}` };
      }
    },
    () => timedOutOutcome(ctx),
  );
  const { text, truncated } = truncateText(outcome.text, ctx.maxChars);
  const observation: Observation = {
    text,
    ok: outcome.ok,
    truncated,
    elapsedMs: Math.round((performance.now() - started) * 10) / 10,
  };
  if (outcome.error !== undefined) observation.error = outcome.error;
  return observation;
}

const timedOutOutcome = (ctx: ToolContext): ToolOutcome => ({
  ok: false,
  error: "timeout",
  text: `Tool call timed out after ${ctx.timeoutMs} ms.`,
});

function abortedOutcome(ctx: ToolContext): ToolOutcome {
  if (ctx.signal?.aborted) return { ok: false, error: "aborted", text: "Tool call was cancelled." };
  return timedOutOutcome(ctx);
}
