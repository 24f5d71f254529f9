import { z } from "zod";
import type { ModelClient } from "../model/index.js";
import { PROFILES, ProfileName, type ToolTag } from "../protocol/index.js";
import { createCodeTool } from "./code-tool.js";
import { CorpusError } from "./corpus.js";
import { CorpusIndex } from "./corpus-index.js";
import { createCrawlTool } from "./crawl-tool.js";
import { ToolFailure } from "./guard.js";
import { SandboxLimits } from "./sandbox.js";
import { createSearchTool } from "./search-tool.js";
import type { Tool } from "./types.js";
import { cachedSearch } from "./web-cache.js";
import { type SearchBackend, searxngBackend, serperBackend } from "./web-search.js";
import { throttledSearch } from "./web-throttle.js";

const isModelClient = (v: unknown): v is ModelClient =>
  typeof v === "object" && v !== null && typeof (v as ModelClient).complete === "function";

export const SearchConfig = z
  .object({
    provider: z.enum(["local", "serper", "searxng"]).default("local"),
    apiKey: z.string().min(1).optional(),
    baseUrl: z.url().optional(),
    topK: z.number().int().positive().max(20).default(5),
    /** Web answers are kept here and reused (`web-cache.ts`); none kept when absent. */
    cacheDir: z.string().min(1).optional(),
    /** Web requests started per second at most. */
    perSecond: z.number().positive().default(5),
    /** Retries of a web request after a transient failure. */
    retries: z.number().int().nonnegative().max(10).default(3),
  })
  .refine((s) => s.provider !== "serper" || s.apiKey, { message: "search.apiKey is required for serper" })
  .refine((s) => s.provider !== "searxng" || s.baseUrl, {
    message: "search.baseUrl is required for searxng",
  });

export const ToolsetConfig = z.object({
  /** JSONL corpus `{id,title,text,url?}` behind local search and offline crawling. */
  corpus: z.string().min(1).optional(),
  /** Where the corpus index is kept; default `<corpus>.index/`. */
  indexDir: z.string().min(1).optional(),
  /** An index opened beforehand (`CorpusIndex.open`), used instead of opening `corpus` lazily. */
  index: z.custom<CorpusIndex>((v) => v instanceof CorpusIndex, "index must be a CorpusIndex").optional(),
  /** Only the tools this protocol profile enables; default all four. */
  profile: ProfileName.default("all"),
  /** `web_search` backend; `wiki_search` always searches the local corpus. */
  search: SearchConfig.default({ provider: "local", topK: 5, perSecond: 5, retries: 3 }),
  crawl: z
    .object({
      offline: z.boolean().default(false),
      summarizer: z.custom<ModelClient>(isModelClient, "summarizer must be a ModelClient").optional(),
      fileRoots: z.array(z.string()).default([]),
      maxUrls: z.number().int().positive().default(5),
      maxBytes: z
        .number()
        .int()
        .positive()
        .default(2 * 1024 ** 2),
    })
    .default({ offline: false, fileRoots: [], maxUrls: 5, maxBytes: 2 * 1024 ** 2 }),
  code: z
    .object({
      unsafeNoSandbox: z.boolean().optional(),
      python: z.string().optional(),
      bwrap: z.string().optional(),
      limits: SandboxLimits.partial().optional(),
    })
    .default({}),
});
export type ToolsetConfig = z.input<typeof ToolsetConfig>;

/** The corpus index, opened on first use and shared by every tool that needs it. */
function lazyIndex(config: z.infer<typeof ToolsetConfig>): (() => Promise<CorpusIndex>) | undefined {
  if (config.index) {
    const ready = Promise.resolve(config.index);
    return () => ready;
  }
  const corpus = config.corpus;
  if (!corpus) return undefined;
  let opening: Promise<CorpusIndex> | undefined;
  return () => {
    opening ??= CorpusIndex.open(corpus, { indexDir: config.indexDir }).then((r) => r.index);
    return opening;
  };
}

function localBackend(index: (() => Promise<CorpusIndex>) | undefined): SearchBackend {
  return {
    async search(query, k) {
      if (!index) throw new ToolFailure("no_corpus", "Local search has no corpus configured.");
      try {
        return await (await index()).search(query, k);
      } catch (err) {
        if (err instanceof CorpusError) throw new ToolFailure("corpus_error", err.message);
        throw err;
      }
    },
  };
}

function webBackend(search: z.infer<typeof SearchConfig>, local: SearchBackend): SearchBackend {
  if (search.provider === "local") return local;
  const api =
    search.provider === "serper"
      ? serperBackend({ apiKey: search.apiKey!, baseUrl: search.baseUrl })
      : searxngBackend({ baseUrl: search.baseUrl! });
  const polite = throttledSearch(api, { perSecond: search.perSecond, retries: search.retries });
  if (!search.cacheDir) return polite;
  return cachedSearch(polite, {
    dir: search.cacheDir,
    provider: `${search.provider} ${search.baseUrl ?? "default"}`,
  });
}

/**
 * The tool agents (`web_search`, `wiki_search`, `crawl_page`, `code`; those of `profile` only)
 * configured from one config. The corpus index is opened lazily, on the first search or crawl that needs it (building it
 * if no fresh index exists); to open it up front, and fail early on a bad corpus, pass
 * `index: (await CorpusIndex.open(corpus)).index` instead of `corpus`.
 */
export function createToolset(input: ToolsetConfig = {}): Map<ToolTag, Tool> {
  const config = ToolsetConfig.parse(input);
  const index = lazyIndex(config);
  const local = localBackend(index);
  const { topK } = config.search;
  const tools: Tool[] = [
    createSearchTool("web_search", webBackend(config.search, local), topK),
    createSearchTool("wiki_search", local, topK),
    createCrawlTool({ ...config.crawl, corpus: index }),
    createCodeTool({
      sandbox: {
        unsafeNoSandbox: config.code.unsafeNoSandbox,
        python: config.code.python,
        bwrap: config.code.bwrap,
      },
      limits: config.code.limits,
    }),
  ];
  const enabled = new Set<ToolTag>(PROFILES[config.profile].tools);
  return new Map(tools.filter((t) => enabled.has(t.tag)).map((t) => [t.tag, t]));
}

/**
 * Has every tool of `tools` get ready in the background (`Tool.prepare`): a command calls it before it
 * waits for its model, so that the first code call of an evaluation does not also wait for the
 * sandbox's check (~0.3 s: bwrap's version, a cgroup scope tried, the launcher started, a test run).
 * Failures are left to the tools' first calls, which report them as observations.
 */
export function prepareToolset(tools: Map<ToolTag, Tool>): void {
  for (const tool of tools.values()) tool.prepare?.().catch(() => {});
}
