import { homedir } from "node:os";
import { join } from "node:path";
import { type ModelClient, openModel } from "../model/index.js";
import type { ToolsetConfig } from "../tools/index.js";
import { modelApiKey, type WebToolFlags } from "./flags.js";

/** Where web answers are cached when `--web-cache` is not given: shared by every run on the machine. */
const defaultWebCache = () =>
  join(process.env.XDG_CACHE_HOME ?? join(homedir(), ".cache"), "coa", "web-search");

/**
 * The `search` and `crawl` parts of a toolset as `--search`, `--online` and friends ask, with the
 * summariser model opened (close it with `close`). Serper's key comes from `$SERPER_API_KEY`.
 */
export async function openWebTools(
  flags: WebToolFlags,
  searchTopK?: number,
): Promise<Pick<ToolsetConfig, "search" | "crawl"> & { close: () => Promise<void> }> {
  const summarizer: ModelClient | undefined = flags.summarizer
    ? await openModel(flags.summarizer, { apiKey: modelApiKey() })
    : undefined;
  const web = flags.search !== "local";
  return {
    search: {
      provider: flags.search,
      baseUrl: flags.searchUrl,
      apiKey: flags.search === "serper" ? process.env.SERPER_API_KEY : undefined,
      topK: searchTopK,
      ...(web ? { cacheDir: flags.webCache ?? defaultWebCache() } : {}),
      ...(flags.webRate === undefined ? {} : { perSecond: flags.webRate }),
    },
    crawl: { offline: !flags.online, ...(summarizer ? { summarizer } : {}) },
    close: async () => {
      await summarizer?.close?.();
    },
  };
}
