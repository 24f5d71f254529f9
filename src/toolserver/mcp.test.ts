import path from "node:path";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ROUTES, type RunningToolServer, startToolServer } from "./index.js";
import { worldConfig } from "./testing.js";

const TOOLS = ["crawl_page", "retrieve", "run_code", "search"];
const textOf = (result: Awaited<ReturnType<Client["callTool"]>>) =>
  (result.content as Array<{ type: string; text: string }>).map((c) => c.text).join("\n");

/** Lists the tools and calls two of them, as any MCP client would. */
async function exercise(client: Client): Promise<void> {
  const { tools } = await client.listTools();
  expect(tools.map((t) => t.name).sort()).toEqual(TOOLS);
  const retrieve = tools.find((t) => t.name === "retrieve")!;
  expect(retrieve.inputSchema.required).toEqual(["query"]);
  const found = await client.callTool({
    name: "retrieve",
    arguments: { query: "capital of Arden", topk: 1 },
  });
  expect(found.isError).toBeFalsy();
  expect(textOf(found)).toMatch(/^Doc 1 \(Title: Arden\)\n.*Kestrel Bay/);
  const page = await client.callTool({
    name: "crawl_page",
    arguments: { urls: ["https://world.local/wiki/Glass_bridge"] },
  });
  expect(textOf(page)).toContain("120 metres");
}

let server: RunningToolServer;
let corpus: string;

beforeAll(async () => {
  const cfg = await worldConfig();
  corpus = cfg.corpus;
  server = await startToolServer(cfg, { host: "127.0.0.1", port: 0, routes: ROUTES });
});
afterAll(() => server.close());

describe("the tools over MCP, through the official SDK's client", () => {
  it("streamable HTTP at /mcp: lists and calls the tools, runs code, reports bad arguments", async () => {
    const client = new Client({ name: "coa-test", version: "1.0.0" });
    await client.connect(new StreamableHTTPClientTransport(new URL(`${server.url}/mcp`)));
    try {
      await exercise(client);
      const run = await client.callTool({ name: "run_code", arguments: { code: "print(6 * 7)" } });
      expect(run.isError).toBeFalsy();
      expect(textOf(run)).toBe("42");
      const crash = await client.callTool({ name: "run_code", arguments: { code: "raise SystemExit(4)" } });
      expect(crash.isError).toBe(true);
      expect(textOf(crash)).toContain("[exit code 4]");
      const bad = await client.callTool({ name: "search", arguments: { query: 7 } });
      expect(bad.isError).toBe(true);
    } finally {
      await client.close();
    }
  });

  it("stdio: `coa tools mcp --corpus` serves the same tools", async () => {
    const transport = new StdioClientTransport({
      command: process.execPath,
      args: [path.resolve("bin/coa.js"), "tools", "mcp", "--corpus", corpus],
      stderr: "pipe",
    });
    const client = new Client({ name: "coa-test", version: "1.0.0" });
    await client.connect(transport);
    try {
      await exercise(client);
    } finally {
      await client.close();
    }
  }, 20_000);
});
