import { z } from "zod";
import type { ModelClient } from "../model/index.js";
import { splitUrls } from "../protocol/index.js";
import { CorpusError } from "./corpus.js";
import type { CorpusIndex } from "./corpus-index.js";
import { type FetchLimits, fetchPage } from "./fetch-page.js";
import { errorMessage, guardTool, ToolFailure, truncateText } from "./guard.js";
import type { PageText } from "./html-text.js";
import { type Tool, ToolArgsError } from "./types.js";

export const CrawlArgs = z.object({ urls: z.array(z.string().min(1)).min(1) });
export type CrawlArgs = z.infer<typeof CrawlArgs>;

export interface CrawlOptions extends FetchLimits {
  /** Never touch the network: only corpus documents and allowed files can be read. */
  offline: boolean;
  /** URLs read per call at most; the rest are listed as skipped. */
  maxUrls: number;
  /** The corpus whose documents' `url` fields resolve offline; absent when no corpus is configured. */
  corpus?: () => Promise<CorpusIndex>;
  /** When set (and the call has a goal), each page is condensed to what bears on the goal. */
  summarizer?: ModelClient;
}

/** Page text the summarizer sees at most: a few thousand tokens. */
const SUMMARY_INPUT_CHARS = 8000;
const SUMMARY_MAX_TOKENS = 300;

function summaryPrompt(goal: string, url: string, page: PageText): string {
  return [
    "You help a researcher by reading one web page for them.",
    "Copy out only the facts from the page that help answer the question: short sentences, with names,",
    'dates and numbers exactly as written. If the page says nothing useful for it, write "Nothing relevant."',
    "",
    `Question: ${goal}`,
    "",
    `Page: ${url}${page.title ? ` (${page.title})` : ""}`,
    page.text.slice(0, SUMMARY_INPUT_CHARS),
    "",
    "Relevant facts:",
  ].join("\n");
}

async function summarize(model: ModelClient, goal: string, url: string, page: PageText, signal: AbortSignal) {
  const result = await model.complete(
    { prompt: summaryPrompt(goal, url, page), maxTokens: SUMMARY_MAX_TOKENS, temperature: 0 },
    { signal },
  );
  return result.choices[0].text.trim();
}

interface Section {
  url: string;
  ok: boolean;
  error?: string;
  body: string;
}

async function readPage(url: string, opts: CrawlOptions, signal: AbortSignal): Promise<PageText> {
  if (opts.corpus) {
    const doc = await (await opts.corpus()).documentByUrl(url);
    if (doc) return { title: doc.title, text: doc.text };
  }
  if (opts.offline && /^https?:/i.test(url)) {
    throw new ToolFailure("offline", "Not in the local corpus, and crawling is offline.");
  }
  return fetchPage(url, opts, signal);
}

async function crawlOne(url: string, opts: CrawlOptions, goal: string | undefined, signal: AbortSignal) {
  let page: PageText;
  try {
    page = await readPage(url, opts, signal);
  } catch (err) {
    if (signal.aborted) throw err;
    const error =
      err instanceof ToolFailure ? err.code : err instanceof CorpusError ? "corpus_error" : "read_error";
    return { url, ok: false, error, body: `Error (${error}): ${errorMessage(err)}` } satisfies Section;
  }
  const head = page.title ? `Title: ${page.title}\n` : "";
  if (page.text === "") return { url, ok: true, body: `${head}(the page has no readable text)` };
  if (opts.summarizer && goal) {
    try {
      const summary = await summarize(opts.summarizer, goal, url, page, signal);
      return { url, ok: true, body: `${head}Relevant to the question:\n${summary}` };
    } catch (err) {
      if (signal.aborted) throw err;
      return {
        url,
        ok: true,
        body: `${head}(summary failed: ${errorMessage(err)}; page text follows)\n${page.text}`,
      };
    }
  }
  return { url, ok: true, body: `${head}${page.text}` };
}

/**
 * `crawl_page`: reads each URL (corpus document, file or web page), as readable text or as a summary
 * aimed at the question. Every URL gets its own labelled section; one failing URL does not fail the
 * others.
 */
export function createCrawlTool(opts: CrawlOptions): Tool<CrawlArgs> {
  return {
    tag: "crawl_page",
    description:
      "Read web pages: `url1 | url2`; returns each page's readable text (or the part relevant to the question).",
    argsSchema: CrawlArgs,
    parseArgs(raw) {
      const urls = splitUrls(raw);
      if (urls.length === 0) {
        throw new ToolArgsError(
          "No URL given. Write one or more URLs separated by |, e.g. <crawl_page>https://a.org/x | https://b.org/y</crawl_page>.",
        );
      }
      return { urls };
    },
    run(args, ctx) {
      return guardTool(ctx, async (signal) => {
        const urls = args.urls.slice(0, opts.maxUrls);
        const sections = await Promise.all(urls.map((url) => crawlOne(url, opts, ctx.goal, signal)));
        // Each page gets an equal share of the observation so one long page cannot crowd out the rest.
        const share = Math.max(200, Math.floor(ctx.maxChars / urls.length) - 100);
        const parts = sections.map((s, i) => `[${i + 1}] ${s.url}\n${truncateText(s.body, share).text}`);
        const skipped = args.urls.length - urls.length;
        if (skipped > 0)
          parts.push(
            `(${skipped} more URL${skipped > 1 ? "s" : ""} not read: at most ${opts.maxUrls} per call)`,
          );
        const failed = sections.filter((s) => !s.ok);
        const outcome = { ok: failed.length < sections.length, text: parts.join("\n\n") };
        return outcome.ok ? outcome : { ...outcome, error: failed[0].error };
      });
    },
  };
}
