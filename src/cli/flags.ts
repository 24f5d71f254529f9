import { z } from "zod";

/** Checks a subcommand's flags; a bad one is reported as the user typed it (`--max-turns: …`). */
export function parseFlags<S extends z.ZodType>(schema: S, raw: unknown): z.infer<S> {
  const parsed = schema.safeParse(raw);
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    throw new Error(
      `--${String(issue.path[0]).replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`)}: ${issue.message}`,
    );
  }
  return parsed.data;
}

/** `--search-top-k`: results per search call, shared by every command that runs the tools. */
export const SearchTopK = z.coerce.number().int().positive().max(20).optional();
export const SEARCH_TOP_K_OPTION = ["--search-top-k <n>", "results per search call (default 5)"] as const;

/**
 * `--request-timeout` and `--retries`: how long one attempt of one model-server request may take and
 * how many times a transient failure (408/429/5xx, refused connection, timeout) is retried; shared by
 * every command that opens a `--model`. An episode's own `--max-time` bounds all attempts together.
 */
export const RequestTimeout = z.coerce.number().positive().optional();
export const Retries = z.coerce.number().int().nonnegative().max(100).optional();
export const REQUEST_TIMEOUT_OPTION = [
  "--request-timeout <seconds>",
  "limit for one attempt of one model-server request (default 120; the engine: 600)",
] as const;
export const RETRIES_OPTION = [
  "--retries <n>",
  "retries of a model-server request after a transient failure (default 3; the engine: none)",
] as const;

/** `--request-timeout` and `--retries` as `openModel` takes them. */
export function requestOptions(flags: { requestTimeout?: number; retries?: number }): {
  timeoutMs?: number;
  maxRetries?: number;
} {
  return {
    ...(flags.requestTimeout === undefined ? {} : { timeoutMs: Math.round(flags.requestTimeout * 1000) }),
    ...(flags.retries === undefined ? {} : { maxRetries: flags.retries }),
  };
}

/**
 * How a served model is driven, shared by every command that runs episodes on a `--model`: text
 * mode and route (detected when not forced) and the chat template.
 */
export const TextOnly = z.boolean().optional();
export const TEXT_ONLY_OPTION = [
  "--text-only",
  "force text mode: the server takes and returns text only, ids come from the byte tokenizer (default: when the server has no /tokenize)",
] as const;
export const ChatTemplate = z.enum(["auto", "on", "off"]).default("auto");
export const CHAT_TEMPLATE_OPTION = [
  "--chat-template <mode>",
  "prompt through the model's chat template via the server's /tokenize: auto | on (required) | off",
  "auto",
] as const;
