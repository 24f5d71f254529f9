import { existsSync } from "node:fs";
import { writeFile } from "node:fs/promises";
import { describe, expect, it } from "vitest";
import { CorpusIndex, defaultIndexDir } from "./corpus-index.js";
import { probeSandbox } from "./sandbox.js";
import { writeCorpusFile } from "./test-corpus.js";
import { createToolset, prepareToolset } from "./toolset.js";

const ctx = { timeoutMs: 5000, maxChars: 2000 };

describe("createToolset", () => {
  it("offers every tool tag, or only those of a profile", () => {
    expect([...createToolset().keys()].sort()).toEqual(["code", "crawl_page", "web_search", "wiki_search"]);
    expect([...createToolset({ profile: "mhqa" }).keys()]).toEqual(["wiki_search"]);
    expect([...createToolset({ profile: "web" }).keys()]).toEqual(["web_search", "crawl_page"]);
  });

  it("opens the corpus index on first use and shares it between search and crawl", async () => {
    const corpus = await writeCorpusFile();
    const tools = createToolset({ corpus, crawl: { offline: true } });
    expect(existsSync(defaultIndexDir(corpus))).toBe(false);
    const wiki = tools.get("wiki_search")!;
    const obs = await wiki.run(wiki.parseArgs("mayor of Veltmoor"), ctx);
    expect(obs.ok).toBe(true);
    expect(obs.text.split("\n")[0]).toMatch(/^1\. (Veltmoor|Ilse Brandt) \(https:\/\/world\.local\/wiki\//);
    expect(existsSync(defaultIndexDir(corpus))).toBe(true);
    // web_search searches the same corpus when no web provider is configured.
    const web = tools.get("web_search")!;
    expect((await web.run(web.parseArgs("mayor of Veltmoor"), ctx)).text).toBe(obs.text);
    const crawl = tools.get("crawl_page")!;
    const page = await crawl.run(
      crawl.parseArgs("https://world.local/wiki/Dunmere | https://world.local/wiki/Arden"),
      ctx,
    );
    expect(page.text).toMatch(/^\[1\] https:\/\/world\.local\/wiki\/Dunmere\nError \(offline\)/);
    expect(page.text).toContain("[2] https://world.local/wiki/Arden\nTitle: Arden\nArden is a province");
  });

  it("uses an index opened beforehand", async () => {
    const { index } = await CorpusIndex.open(await writeCorpusFile());
    const wiki = createToolset({ index }).get("wiki_search")!;
    expect((await wiki.run({ query: "Kestrel Bay capital" }, ctx)).text).toMatch(/^1\. Arden /);
  });

  it("reports a missing or broken corpus as an observation", async () => {
    const bare = createToolset().get("wiki_search")!;
    expect(await bare.run({ query: "x" }, ctx)).toMatchObject({ ok: false, error: "no_corpus" });
    const corpus = await writeCorpusFile();
    await writeFile(corpus, '{"id":"a","title":"A","text":"t"}\n{"id":"b","text":"t"}\n');
    const broken = createToolset({ corpus }).get("wiki_search")!;
    const obs = await broken.run({ query: "x" }, ctx);
    expect(obs).toMatchObject({ ok: false, error: "corpus_error" });
    expect(obs.text).toBe(`${corpus}:2: field "title": Invalid input: expected string, received undefined`);
  });

  it("validates provider settings", () => {
    expect(() => createToolset({ search: { provider: "serper" } })).toThrow(/apiKey is required for serper/);
    expect(() => createToolset({ search: { provider: "searxng" } })).toThrow(
      /baseUrl is required for searxng/,
    );
    expect(createToolset({ search: { provider: "searxng", baseUrl: "http://127.0.0.1:8888" } }).size).toBe(4);
  });
});

describe("prepareToolset", () => {
  it("gets the tools ready in the background, leaving failures to their first calls", async () => {
    const bwrap = "/nonexistent/bwrap-prepared";
    const tools = createToolset({ profile: "all", code: { bwrap } });
    prepareToolset(tools); // returns at once; the failed check rejects unobserved, not unhandled
    await expect(probeSandbox({ bwrap })).rejects.toThrow(/cannot run/);
    const obs = await tools.get("code")!.run({ code: "print(1)" }, { timeoutMs: 5000, maxChars: 2000 });
    expect(obs).toMatchObject({ ok: false, error: "sandbox_refused" });
  });
});
