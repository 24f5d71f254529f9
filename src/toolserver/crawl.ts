import type { Handler } from "hono";
import { z } from "zod";
import { splitUrls } from "../protocol/index.js";
import type { ToolBackend } from "./backend.js";
import { withinDeadline } from "./deadline.js";
import { readBody } from "./errors.js";

/**
 * AFM's crawl request. Its client also sends its summary settings and the address, key and name of the
 * summary model it would call; here the summariser is the server's own (`--summarizer`), so those
 * fields are accepted and not used. Any other field is refused.
 */
export const CrawlRequest = z.strictObject({
  urls: z.array(z.string().max(8_000)).min(1).max(100),
  task: z.string().optional(),
  web_search_query: z.string().optional(),
  think_content: z.string().optional(),
  messages: z.array(z.record(z.string(), z.unknown())).nullish(),
  summary_type: z.string().nullish(),
  summary_prompt_type: z.string().nullish(),
  chunk_size: z.number().nullish(),
  do_last_summary: z.boolean().nullish(),
  api_url: z.string().nullish(),
  api_key: z.string().nullish(),
  model: z.string().nullish(),
});
export type CrawlRequest = z.infer<typeof CrawlRequest>;

/** What the summariser aims at: the question being answered, else the search that found the page. */
export const crawlGoal = (req: CrawlRequest): string | undefined =>
  [req.task, req.web_search_query].map((s) => s?.trim()).find((s) => s) || undefined;

/** `POST /crawl_page` → `{success, obs, error_message?, processing_time}` (seconds), as AFM's server answers. */
export const crawlHandler =
  (backend: ToolBackend, opts: { timeoutMs: number }): Handler =>
  async (c) => {
    const started = performance.now();
    const req = await readBody(c, CrawlRequest);
    const seconds = () => (performance.now() - started) / 1000;
    // AFM clients may pass `[title](url)` links or several URLs joined by `|` in one entry.
    const urls = req.urls.flatMap(splitUrls);
    if (urls.length === 0) {
      return c.json({
        success: false,
        obs: "",
        error_message: "No valid URL found",
        processing_time: seconds(),
      });
    }
    const obs = await withinDeadline(c, opts.timeoutMs, (signal) =>
      backend.crawl(urls, crawlGoal(req), { signal, timeoutMs: opts.timeoutMs }),
    );
    return c.json({
      success: obs.ok,
      obs: obs.text,
      ...(obs.ok ? {} : { error_message: obs.text }),
      processing_time: seconds(),
    });
  };
