import { mkdtemp, readdir } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { FixtureServer } from "../model/testing/index.js";
import { createToolset } from "../tools/index.js";
import { WebToolFlags } from "./flags.js";
import { openWebTools } from "./web-tools.js";

const ctx = { timeoutMs: 5000, maxChars: 4000 };
let server: FixtureServer | undefined;
afterEach(async () => {
  await server?.close();
  server = undefined;
});

describe("web tool flags (teach, eval, train rl)", () => {
  it("search the web through a cache and crawl online only when asked", async () => {
    server = await FixtureServer.start({
      "POST /search": () => ({
        json: { organic: [{ title: "Sable river", link: `${server!.url}/sable`, snippet: "A river." }] },
      }),
      "GET /sable": () => ({ text: "The Sable is a river in Arden. It is 120 km long." }),
    });
    process.env.SERPER_API_KEY = "test-key";
    const webCache = await mkdtemp(join(tmpdir(), "coa-webtools-"));
    const flags = WebToolFlags.parse({ search: "serper", searchUrl: server.url, online: true, webCache });
    const web = await openWebTools(flags, 3);
    const tools = createToolset({ ...web, profile: "web" });
    const found = await tools.get("web_search")!.run({ query: "Sable river" }, ctx);
    expect(found.text).toBe(`1. Sable river (${server.url}/sable)\n   A river.`);
    expect(server.requests[0]).toMatchObject({
      headers: { "x-api-key": "test-key" },
      body: { q: "Sable river", num: 3 },
    });
    expect(await readdir(webCache)).toHaveLength(1);
    const page = await tools.get("crawl_page")!.run({ urls: [`${server.url}/sable`] }, ctx);
    expect(page.text).toContain("It is 120 km long.");

    // Offline and local by default.
    const offline = createToolset({ ...(await openWebTools(WebToolFlags.parse({}))), profile: "web" });
    const refused = await offline.get("crawl_page")!.run({ urls: [`${server.url}/sable`] }, ctx);
    expect(refused.text).toContain("crawling is offline");
    expect(await offline.get("web_search")!.run({ query: "x" }, ctx)).toMatchObject({
      ok: false,
      error: "no_corpus",
    });
  });
});
