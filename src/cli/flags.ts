import type { Command } from "commander";
import { z } from "zod";

/** A flag as typed on the command line from its key in a flag schema: `maxTurns` is `--max-turns`. */
export const flagName = (key: string): string => `--${key.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`)}`;

/** Checks a subcommand's flags; a bad one is reported as the user typed it (`--max-turns: …`). */
export function parseFlags<S extends z.ZodType>(schema: S, raw: unknown): z.infer<S> {
  const parsed = schema.safeParse(raw);
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    throw new Error(`${flagName(String(issue.path[0]))}: ${issue.message}`);
  }
  return parsed.data;
}

/** `--search-top-k`: results per search call, shared by every command that runs the tools. */
export const SearchTopK = z.coerce.number().int().positive().max(20).optional();
export const SEARCH_TOP_K_OPTION = ["--search-top-k <n>", "results per search call (default 5)"] as const;

/** Where `web_search` gets its results: the local corpus, Serper or SearXNG (every command alike). */
export const SearchProvider = z.enum(["local", "serper", "searxng"]);
export const SEARCH_OPTION = [
  "--search <provider>",
  "web_search backend: local (the corpus) | serper ($SERPER_API_KEY) | searxng",
  "local",
] as const;
export const SEARCH_URL_OPTION = [
  "--search-url <url>",
  "SearXNG base URL, or another Serper endpoint",
] as const;

/** The model server's key: the flag, else $COA_API_KEY, else $OPENAI_API_KEY. */
export const modelApiKey = (flag?: string): string | undefined =>
  flag ?? process.env.COA_API_KEY ?? process.env.OPENAI_API_KEY;

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

/**
 * Web tools for the commands that run many episodes (`teach`, `eval`, `train rl`): `web_search` from
 * the local corpus, Serper or SearXNG, and `crawl_page` offline (corpus documents only) unless
 * `--online`, optionally with a goal-directed summariser model. Offline is the default.
 */
export const WebToolFlags = z.object({
  search: SearchProvider.default("local"),
  searchUrl: z.url().optional(),
  online: z.boolean().default(false),
  summarizer: z.string().min(1).optional(),
  webCache: z.string().min(1).optional(),
  webRate: z.coerce.number().positive().optional(),
});
export type WebToolFlags = z.infer<typeof WebToolFlags>;

export function addWebToolOptions(command: Command): Command {
  return command
    .option(...SEARCH_OPTION)
    .option(...SEARCH_URL_OPTION)
    .option("--online", "crawl_page may fetch web pages (default: corpus documents only)")
    .option("--summarizer <spec>", "model that condenses crawled pages to what bears on the goal")
    .option(
      "--web-cache <dir>",
      "where web search answers are kept and reused (default: ~/.cache/coa/web-search)",
    )
    .option("--web-rate <n>", "web search requests per second at most (default 5)");
}
