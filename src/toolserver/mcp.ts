import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import { z } from "zod";
import { formatHits, type PythonRun, SandboxUnavailableError, withDeadline } from "../tools/index.js";
import type { RetrievedDoc, ToolBackend } from "./backend.js";

export interface McpOptions {
  defaultTopk: number;
  timeoutMs: number;
}

const text = (body: string, isError = false): CallToolResult => ({
  content: [{ type: "text", text: body }],
  ...(isError ? { isError: true } : {}),
});

/** Retrieved documents as a model reads them: numbered, each with its title. */
const formatDocs = (docs: RetrievedDoc[]): string =>
  docs.length === 0
    ? "No documents found."
    : docs.map((d, i) => `Doc ${i + 1} (Title: ${d.title})\n${d.text}`).join("\n\n");

function formatRun(run: PythonRun): CallToolResult {
  const parts = [run.stdout.trimEnd(), run.stderr.trimEnd() && `stderr:\n${run.stderr.trimEnd()}`].filter(
    Boolean,
  );
  const failed = run.killedBy !== null || run.exitCode !== 0;
  if (failed) parts.push(run.killedBy ? `[killed: ${run.killedBy}]` : `[exit code ${run.exitCode}]`);
  return text(parts.join("\n") || "(no output)", failed);
}

/**
 * Every tool call runs under the server's limit; one that outlives it is answered as a failed call
 * (the MCP way: `isError`), never left hanging.
 */
function guarded(
  timeoutMs: number,
  signal: AbortSignal,
  work: (signal: AbortSignal) => Promise<CallToolResult>,
) {
  return withDeadline({ signal, timeoutMs }, 0, work, () =>
    text(`The tool did not answer within ${timeoutMs} ms.`, true),
  );
}

/**
 * The tool server's tools over MCP: `retrieve`, `search`, `crawl_page`, `run_code`. Built per session
 * (the SDK's stateless HTTP mode wants a fresh server per request); all share one backend.
 */
export function createMcpServer(backend: ToolBackend, opts: McpOptions): McpServer {
  const server = new McpServer({ name: "coa-tools", version: "0.1.0" });
  server.registerTool(
    "retrieve",
    {
      description: "Search the local encyclopedia corpus (BM25); returns whole documents, best first.",
      inputSchema: {
        query: z.string().min(1).describe("what to look for"),
        topk: z
          .number()
          .int()
          .positive()
          .max(100)
          .optional()
          .describe(`documents to return (default ${opts.defaultTopk})`),
      },
    },
    ({ query, topk }, extra) =>
      guarded(opts.timeoutMs, extra.signal, async () =>
        text(formatDocs(await backend.retrieve(query, topk ?? opts.defaultTopk))),
      ),
  );
  server.registerTool(
    "search",
    {
      description: "Web-style search over the local corpus; returns titles, links and snippets.",
      inputSchema: {
        query: z.string().min(1).describe("what to look for"),
        num: z.number().int().positive().max(100).optional().describe("results to return (default 10)"),
      },
    },
    ({ query, num }, extra) =>
      guarded(opts.timeoutMs, extra.signal, async () =>
        text(formatHits(query, await backend.search(query, num ?? 10))),
      ),
  );
  server.registerTool(
    "crawl_page",
    {
      description: "Read pages of the local corpus by URL (as search results link them).",
      inputSchema: {
        urls: z.array(z.string().min(1)).min(1).max(100).describe("URLs to read"),
        task: z.string().optional().describe("the question being answered, which a summariser aims at"),
      },
    },
    ({ urls, task }, extra) =>
      guarded(opts.timeoutMs, extra.signal, async (signal) => {
        const obs = await backend.crawl(urls, task || undefined, { signal, timeoutMs: opts.timeoutMs });
        return text(obs.text, !obs.ok);
      }),
  );
  server.registerTool(
    "run_code",
    {
      description: "Run a Python program in coa's sandbox (no network); returns its stdout and stderr.",
      inputSchema: {
        code: z.string().min(1).describe("the Python program"),
        stdin: z.string().optional().describe("its standard input"),
        run_timeout: z.number().positive().max(300).optional().describe("seconds it may run (default 10)"),
      },
    },
    ({ code, stdin, run_timeout }, extra) =>
      guarded(opts.timeoutMs, extra.signal, async (signal) => {
        // The sandbox's own timer must fire first, so the reply names the time limit rather than the deadline.
        const wallMs = Math.max(100, Math.min(Math.round((run_timeout ?? 10) * 1000), opts.timeoutMs - 1000));
        try {
          return formatRun(await backend.runCode({ code, stdin, wallMs, memoryBytes: 1024 ** 3 }, signal));
        } catch (err) {
          if (err instanceof SandboxUnavailableError) return text(err.message, true);
          throw err;
        }
      }),
  );
  return server;
}
