import { mkdir, writeFile } from "node:fs/promises";
import { dirname, join } from "node:path";
import { pathToFileURL } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { FixtureServer, ScriptedModel } from "../model/testing/index.js";
import { CorpusIndex } from "./corpus-index.js";
import { type CrawlOptions, createCrawlTool } from "./crawl-tool.js";
import { writeCorpusFile } from "./test-corpus.js";
import { ToolArgsError } from "./types.js";

const PAGE = `<!doctype html><html><head><title>Sable river</title></head><body><nav>Menu</nav><main>
<p>The Sable is a river in Arden. It rises in the Kestrel hills and flows south for 212 kilometres.</p>
<p>Its main crossing is the glass bridge at Veltmoor, opened in 1899, which replaced an older ferry.</p>
</main></body></html>`;
const html = (text: string) => ({ headers: { "content-type": "text/html; charset=utf-8" }, text });

let server: FixtureServer;
let corpus: CorpusIndex;
let dir: string;
const base: CrawlOptions = { offline: false, maxUrls: 3, maxBytes: 100_000, fileRoots: [] };
const ctx = { timeoutMs: 3000, maxChars: 3000 };

beforeAll(async () => {
  server = await FixtureServer.start({
    "GET /sable": () => html(PAGE),
    "GET /notes.txt": () => ({ text: "plain notes\nline two" }),
    "GET /missing": () => ({ status: 404, text: "nope" }),
    "GET /report.pdf": () => ({ headers: { "content-type": "application/pdf" }, text: "%PDF-1.4" }),
    "GET /huge": () => html(`<p>${"word ".repeat(50_000)}</p>`),
  });
  const path = await writeCorpusFile();
  corpus = (await CorpusIndex.open(path)).index;
  dir = dirname(path);
});
afterAll(() => server.close());

describe("crawl_page arguments", () => {
  const tool = createCrawlTool(base);
  it("splits on | and accepts markdown links", () => {
    expect(tool.parseArgs(" https://a.org/x | [B page](https://b.org/y) ")).toEqual({
      urls: ["https://a.org/x", "https://b.org/y"],
    });
  });
  it("asks for a URL when there is none", () => {
    expect(() => tool.parseArgs("  |  ")).toThrow(ToolArgsError);
    expect(() => tool.parseArgs("")).toThrow(/No URL given/);
  });
});

describe("crawl_page", () => {
  it("reads an HTML page as readable text under a labelled section", async () => {
    const obs = await createCrawlTool(base).run({ urls: [`${server.url}/sable`] }, ctx);
    expect(obs.ok).toBe(true);
    expect(obs.text).toBe(
      `[1] ${server.url}/sable\nTitle: Sable river\n` +
        "The Sable is a river in Arden. It rises in the Kestrel hills and flows south for 212 kilometres.\n\n" +
        "Its main crossing is the glass bridge at Veltmoor, opened in 1899, which replaced an older ferry.",
    );
  });

  it("reports each failing URL inside the observation and keeps the others", async () => {
    const obs = await createCrawlTool(base).run(
      { urls: [`${server.url}/missing`, `${server.url}/notes.txt`, `${server.url}/report.pdf`, "nonsense"] },
      ctx,
    );
    expect(obs.ok).toBe(true);
    const sections = obs.text.split("\n\n");
    expect(sections[0]).toBe(
      `[1] ${server.url}/missing\nError (http_404): Fetching the page failed: HTTP 404 Not Found`,
    );
    expect(sections[1]).toBe(`[2] ${server.url}/notes.txt\nplain notes\nline two`);
    expect(sections[2]).toMatch(
      /^\[3\] .*\/report\.pdf\nError \(unsupported_content_type\): Cannot read application\/pdf/,
    );
    expect(sections[3]).toBe("(1 more URL not read: at most 3 per call)");
  });

  it("fails as a whole only when every URL failed", async () => {
    const obs = await createCrawlTool(base).run({ urls: ["ftp://x.org/a", `${server.url}/missing`] }, ctx);
    expect(obs).toMatchObject({ ok: false, error: "unsupported_url" });
  });

  it("caps the bytes read and shares the character budget between pages", async () => {
    const obs = await createCrawlTool({ ...base, maxBytes: 2000 }).run(
      { urls: [`${server.url}/huge`, `${server.url}/sable`] },
      { ...ctx, maxChars: 1200 },
    );
    expect(obs.text.length).toBeLessThanOrEqual(1200);
    const [huge, sable] = obs.text.split(/\n\n(?=\[2\])/);
    expect(huge).toMatch(/…\[truncated \d+ chars\]$/);
    expect(sable).toContain("Title: Sable river");
  });

  it("resolves corpus URLs offline and refuses other web URLs when offline", async () => {
    const tool = createCrawlTool({ ...base, offline: true, corpus: async () => corpus });
    const fetches = () => server.requests.length;
    const before = fetches();
    const obs = await tool.run({ urls: ["https://world.local/wiki/Arden", `${server.url}/sable`] }, ctx);
    expect(obs.text).toBe(
      "[1] https://world.local/wiki/Arden\nTitle: Arden\n" +
        "Arden is a province in the north. Its capital is Kestrel Bay. The province has 14 towns, including Veltmoor and Dunmere.\n\n" +
        `[2] ${server.url}/sable\nError (offline): Not in the local corpus, and crawling is offline.`,
    );
    expect(fetches()).toBe(before);
  });

  it("reads file:// URLs only under the allowed roots", async () => {
    const docs = join(dir, "docs");
    await mkdir(docs, { recursive: true });
    await writeFile(join(docs, "page.html"), PAGE);
    const url = pathToFileURL(join(docs, "page.html")).href;
    const allowed = createCrawlTool({ ...base, offline: true, fileRoots: [docs] });
    expect((await allowed.run({ urls: [url] }, ctx)).text).toContain(
      "Title: Sable river\nThe Sable is a river",
    );
    const outside = await allowed.run(
      { urls: ["file:///etc/passwd", `file://${docs}/../corpus.jsonl`] },
      ctx,
    );
    expect(outside).toMatchObject({ ok: false, error: "file_access_denied" });
    expect(await createCrawlTool(base).run({ urls: [url] }, ctx)).toMatchObject({
      error: "file_access_disabled",
    });
  });

  it("condenses each page to what bears on the goal when a summarizer is configured", async () => {
    const summarizer = new ScriptedModel(["- The glass bridge opened in 1899.\n"]);
    const tool = createCrawlTool({ ...base, summarizer });
    const obs = await tool.run(
      { urls: [`${server.url}/sable`] },
      { ...ctx, goal: "When did the glass bridge open?" },
    );
    expect(obs.text).toBe(
      `[1] ${server.url}/sable\nTitle: Sable river\nRelevant to the question:\n- The glass bridge opened in 1899.`,
    );
    const prompt = summarizer.requests[0].prompt ?? "";
    expect(prompt).toContain("Question: When did the glass bridge open?");
    expect(prompt).toContain("Its main crossing is the glass bridge");
    // Without a goal there is nothing to aim at: the page text comes back as is.
    const plain = await tool.run({ urls: [`${server.url}/sable`] }, ctx);
    expect(plain.text).toContain("flows south for 212 kilometres");
  });
});
