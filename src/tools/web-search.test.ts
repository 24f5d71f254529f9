import { afterEach, describe, expect, it } from "vitest";
import { FixtureServer } from "../model/testing/index.js";
import { createSearchTool } from "./search-tool.js";
import { ToolArgsError } from "./types.js";
import { searxngBackend, serperBackend } from "./web-search.js";

const ctx = { timeoutMs: 2000, maxChars: 4000 };
let server: FixtureServer | undefined;
afterEach(async () => {
  await server?.close();
  server = undefined;
});

describe("Serper adapter", () => {
  it("posts the query with the API key and formats organic results as numbered lines", async () => {
    server = await FixtureServer.start({
      "POST /search": () => ({
        json: {
          organic: [
            {
              title: "Veltmoor - Wikipedia",
              link: "https://en.example/Veltmoor",
              snippet: "Veltmoor is a   river town.",
            },
            { title: "Visit Veltmoor", link: "https://visit.example/", snippet: "x".repeat(400) },
          ],
        },
      }),
    });
    const tool = createSearchTool("web_search", serperBackend({ apiKey: "k-123", baseUrl: server.url }), 5);
    const obs = await tool.run(tool.parseArgs("  Veltmoor\n town "), ctx);
    expect(obs.ok).toBe(true);
    const lines = obs.text.split("\n");
    expect(lines.slice(0, 3)).toEqual([
      "1. Veltmoor - Wikipedia (https://en.example/Veltmoor)",
      "   Veltmoor is a river town.",
      "2. Visit Veltmoor (https://visit.example/)",
    ]);
    expect(lines[3].length).toBeLessThanOrEqual(3 + 200);
    expect(server.requests[0].headers["x-api-key"]).toBe("k-123");
    expect(server.requests[0].body).toEqual({ q: "Veltmoor town", num: 5 });
  });

  it("reports HTTP failures, bad bodies and unreachable servers as observations", async () => {
    server = await FixtureServer.start({
      "POST /search": () => ({ status: 503, json: { message: "overloaded" } }),
      "POST /bad/search": () => ({ text: "<html>not json</html>" }),
    });
    const search = (baseUrl: string) =>
      createSearchTool("web_search", serperBackend({ apiKey: "k", baseUrl }), 5).run({ query: "q" }, ctx);
    expect(await search(server.url)).toMatchObject({
      ok: false,
      error: "http_503",
      text: "Web search (Serper) failed: HTTP 503 Service Unavailable",
    });
    expect(await search(`${server.url}/bad`)).toMatchObject({ ok: false, error: "bad_response" });
    const port = new URL(server.url).port;
    await server.close();
    server = undefined;
    expect(await search(`http://127.0.0.1:${port}`)).toMatchObject({ ok: false, error: "network_error" });
  });

  it("times out on a server that never answers", async () => {
    server = await FixtureServer.start({ "POST /search": () => ({ hang: true }) });
    const tool = createSearchTool("web_search", serperBackend({ apiKey: "k", baseUrl: server.url }), 5);
    const obs = await tool.run({ query: "q" }, { ...ctx, timeoutMs: 150 });
    expect(obs).toMatchObject({ ok: false, error: "timeout" });
  });
});

describe("SearXNG adapter", () => {
  it("asks for JSON results and keeps the top k", async () => {
    server = await FixtureServer.start({
      "GET /search?q=glass+bridge&format=json": () => ({
        json: {
          results: [
            { title: "Glass bridge", url: "https://a.example/gb", content: "It opened in 1899." },
            { title: "Bridges", url: "https://b.example/", content: null },
            { title: "Third", url: "https://c.example/" },
          ],
        },
      }),
    });
    const tool = createSearchTool("web_search", searxngBackend({ baseUrl: `${server.url}/` }), 2);
    const obs = await tool.run({ query: "glass bridge" }, ctx);
    expect(obs.text).toBe(
      "1. Glass bridge (https://a.example/gb)\n   It opened in 1899.\n2. Bridges (https://b.example/)",
    );
  });

  it("says so when nothing matched", async () => {
    server = await FixtureServer.start({
      "GET /search?q=zzz&format=json": () => ({ json: { results: [] } }),
    });
    const tool = createSearchTool("web_search", searxngBackend({ baseUrl: server.url }), 5);
    expect(await tool.run({ query: "zzz" }, ctx)).toMatchObject({ ok: true, text: 'No results for "zzz".' });
  });
});

describe("search tool arguments", () => {
  const tool = createSearchTool("wiki_search", searxngBackend({ baseUrl: "http://127.0.0.1:9" }), 5);
  it("rejects empty and overlong queries with a message the model can act on", () => {
    expect(() => tool.parseArgs(" \n ")).toThrow(ToolArgsError);
    expect(() => tool.parseArgs("")).toThrow("<wiki_search>your query</wiki_search>");
    expect(() => tool.parseArgs("word ".repeat(200))).toThrow(/too long/);
  });
});
