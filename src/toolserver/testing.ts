import { CorpusIndex } from "../tools/index.js";
import { WORLD_DOCS, writeCorpusFile } from "../tools/test-corpus.js";
import type { ToolServerConfig } from "./app.js";
import { createBackend, type ToolBackend } from "./backend.js";

/** A tool server config over the test world's corpus, with the real tools behind it. */
export async function worldConfig(
  overrides: Partial<ToolServerConfig> = {},
): Promise<ToolServerConfig & { corpus: string }> {
  const corpus = await writeCorpusFile(WORLD_DOCS);
  const { index } = await CorpusIndex.open(corpus);
  const backend: ToolBackend = createBackend({
    index,
    codeConcurrency: 2,
    crawlMaxUrls: 5,
    crawlMaxChars: 10_000,
  });
  return { backend, defaultTopk: 3, timeoutMs: 20_000, maxBodyBytes: 64 * 1024, corpus, ...overrides };
}

/** POSTs `body` (an object as JSON, or a raw string as is) and returns the status and parsed reply. */
// biome-ignore lint/suspicious/noExplicitAny: replies are checked field by field by the tests' expectations
export async function post(url: string, body: unknown): Promise<{ status: number; json: any }> {
  const res = await fetch(url, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: typeof body === "string" ? body : JSON.stringify(body),
  });
  return { status: res.status, json: await res.json() };
}
