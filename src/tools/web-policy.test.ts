import { mkdtemp, readdir } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { FixtureServer } from "../model/testing/index.js";
import { createToolset } from "./toolset.js";
import { cachedSearch } from "./web-cache.js";
import { serperBackend } from "./web-search.js";
import { throttledSearch } from "./web-throttle.js";

const ctx = { timeoutMs: 5000, maxChars: 4000 };
let server: FixtureServer | undefined;
afterEach(async () => {
  await server?.close();
  server = undefined;
});

const answer = (title: string) => ({
  json: { organic: [{ title, link: `https://ex.org/${title}`, snippet: "c" }] },
});

describe("web search cache, rate limit and retries", () => {
  it("serves a repeated query from the disk cache, across toolsets, and keeps no failures", async () => {
    let calls = 0;
    server = await FixtureServer.start({
      "POST /search": () => {
        calls += 1;
        return calls === 1 ? { status: 400, json: {} } : answer(`hit${calls}`);
      },
    });
    const cacheDir = join(await mkdtemp(join(tmpdir(), "coa-webcache-")), "web");
    const search = () =>
      createToolset({ search: { provider: "serper", apiKey: "k", baseUrl: server!.url, cacheDir } }).get(
        "web_search",
      )!;
    expect(await search().run({ query: "veltmoor" }, ctx)).toMatchObject({ ok: false, error: "http_400" });
    const first = await search().run({ query: "veltmoor" }, ctx);
    const again = await search().run({ query: "veltmoor" }, ctx);
    expect(first.text).toMatch(/^1\. hit2 /);
    expect(again.text).toBe(first.text);
    expect(calls).toBe(2);
    expect(await readdir(cacheDir)).toHaveLength(1);
  });

  it("retries transient failures with backoff, but not client errors", async () => {
    const statuses = [503, 429, 200];
    server = await FixtureServer.start({
      "POST /search": () => {
        const status = statuses.shift() ?? 200;
        return status === 200 ? answer("ok") : { status, json: {} };
      },
    });
    const api = serperBackend({ apiKey: "k", baseUrl: server.url });
    const signal = new AbortController().signal;
    const hits = await throttledSearch(api, { perSecond: 1000, retries: 2, backoffMs: 5 }).search(
      "q",
      3,
      signal,
    );
    expect(hits.map((h) => h.title)).toEqual(["ok"]);
    expect(server.requests).toHaveLength(3);
    statuses.push(503, 503);
    await expect(
      throttledSearch(api, { perSecond: 1000, retries: 1, backoffMs: 5 }).search("q", 3, signal),
    ).rejects.toThrow(/HTTP 503/);
  });

  it("spaces requests by the rate limit, concurrent ones included", async () => {
    server = await FixtureServer.start({ "POST /search": () => answer("x") });
    const polite = throttledSearch(serperBackend({ apiKey: "k", baseUrl: server.url }), {
      perSecond: 20,
      retries: 0,
    });
    const signal = new AbortController().signal;
    const started = performance.now();
    await Promise.all(["a", "b", "c", "d", "e"].map((q) => polite.search(q, 1, signal)));
    // Five requests 50 ms apart: the last starts 200 ms after the first.
    expect(performance.now() - started).toBeGreaterThanOrEqual(195);
  });

  it("keys the cache by provider, query and k", async () => {
    let calls = 0;
    const backend = {
      async search() {
        calls += 1;
        return [{ title: `t${calls}`, snippet: "" }];
      },
    };
    const dir = await mkdtemp(join(tmpdir(), "coa-webcache-"));
    const signal = new AbortController().signal;
    const a = cachedSearch(backend, { dir, provider: "serper" });
    const b = cachedSearch(backend, { dir, provider: "searxng http://x" });
    await a.search("q", 5, signal);
    await a.search("q", 5, signal);
    await a.search("q", 3, signal);
    await b.search("q", 5, signal);
    expect(calls).toBe(3);
  });
});
