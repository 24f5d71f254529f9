import pLimit from "p-limit";
import type { ModelClient } from "../model/index.js";
import { type Score, scoreTask } from "../rewards/index.js";
import type { Task } from "../tasks/index.js";
import {
  type CorpusIndex,
  createCrawlTool,
  type Observation,
  type PythonRun,
  runPython,
  type SandboxOptions,
  type SearchHit,
} from "../tools/index.js";

/** One retrieved document with its BM25 score. */
export interface RetrievedDoc {
  id: string;
  title: string;
  text: string;
  score: number;
}

export interface CodeRun {
  code: string;
  stdin?: string;
  wallMs: number;
  memoryBytes: number;
}

/**
 * What the routes and the MCP tools call: coa's own tools, behind one seam so that tests can stand in a
 * tool that hangs or fails. Every wire format is built on top of this, never inside it.
 */
export interface ToolBackend {
  retrieve(query: string, k: number): Promise<RetrievedDoc[]>;
  search(query: string, k: number): Promise<SearchHit[]>;
  /** Reads corpus pages by URL; `goal` steers the summariser when one is configured. */
  crawl(
    urls: string[],
    goal: string | undefined,
    deadline: { signal: AbortSignal; timeoutMs: number },
  ): Promise<Observation>;
  /** Rejects with SandboxUnavailableError when the sandbox cannot run here. */
  runCode(run: CodeRun, signal: AbortSignal): Promise<PythonRun>;
  score(task: Task, prediction: string | null, signal: AbortSignal): Promise<Score>;
}

export interface BackendOptions {
  index: CorpusIndex;
  /** Condenses each crawled page to what bears on the request's task (AFM's summary model). */
  summarizer?: ModelClient;
  sandbox?: SandboxOptions;
  /** Sandboxed programs running at once (code runs and code scoring together); default: CPU count. */
  codeConcurrency: number;
  /** URLs one crawl reads at most. */
  crawlMaxUrls: number;
  /** Characters of crawl observation kept. */
  crawlMaxChars: number;
}

/** Page bytes a crawl reads at most, as the agent's own crawl tool does. */
const CRAWL_MAX_BYTES = 2 * 1024 ** 2;

export function createBackend(opts: BackendOptions): ToolBackend {
  const corpus = Promise.resolve(opts.index);
  const crawlTool = createCrawlTool({
    // A tool server for training must answer the same way every time: corpus pages only.
    offline: true,
    maxUrls: opts.crawlMaxUrls,
    maxBytes: CRAWL_MAX_BYTES,
    fileRoots: [],
    corpus: () => corpus,
    summarizer: opts.summarizer,
  });
  // Each run takes a core and up to its memory limit; unbounded parallel runs would starve the host.
  const sandboxSlots = pLimit(opts.codeConcurrency);
  const sandboxed: typeof runPython = (req) =>
    sandboxSlots(() => runPython({ ...req, options: { ...opts.sandbox, ...req.options } }));
  return {
    async retrieve(query, k) {
      const hits = await opts.index.retrieve(query, k);
      return hits.map(({ doc, score }) => ({ id: doc.id, title: doc.title, text: doc.text, score }));
    },
    search: (query, k) => opts.index.search(query, k),
    crawl: (urls, goal, deadline) =>
      crawlTool.run({ urls }, { ...deadline, goal, maxChars: opts.crawlMaxChars }),
    runCode: (run, signal) =>
      sandboxed({
        code: run.code,
        stdin: run.stdin,
        signal,
        limits: {
          wallMs: run.wallMs,
          cpuSeconds: Math.ceil(run.wallMs / 1000),
          memoryBytes: run.memoryBytes,
        },
      }),
    score: (task, prediction, signal) => scoreTask(task, prediction, { sandbox: sandboxed, signal }),
  };
}
