import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js";
import type { Command } from "commander";
import { z } from "zod";
import { type ModelClient, openModel } from "../../model/index.js";
import {
  AFM_PORTS,
  createBackend,
  createMcpServer,
  ROUTES,
  type RunningToolServer,
  startAfmServers,
  startToolServer,
  type ToolServerConfig,
} from "../../toolserver/index.js";
import { usableCpus } from "../../util/index.js";
import { modelApiKey, parseFlags } from "../flags.js";
import { indexCorpus } from "./index-corpus.js";

const Count = z.coerce.number().int().positive();

/** Flags both `coa tools serve` and `coa tools mcp` take: what the tools run over and their limits. */
const ToolFlags = z.object({
  corpus: z.string().min(1),
  topk: Count.max(100).default(3),
  summarizer: z.string().min(1).optional(),
  toolTimeout: z.coerce.number().positive().default(120),
  codeConcurrency: Count.default(usableCpus()),
  unsafeNoSandbox: z.boolean().default(false),
});

export const ServeFlags = ToolFlags.extend({
  host: z.string().min(1).default("127.0.0.1"),
  port: z.coerce.number().int().min(0).max(65535).optional(),
  afmPorts: z.boolean().default(false),
  maxBodyMb: z.coerce.number().positive().default(4),
}).refine((f) => !(f.afmPorts && f.port !== undefined), {
  path: ["port"],
  message: "cannot be combined with --afm-ports, which fixes the ports (8000, 9000, 9001)",
});
export type ServeFlags = z.infer<typeof ServeFlags>;

/** Single-port default: Search-R1's retrieval port, so verl's stock search tool config points here. */
const DEFAULT_PORT = 8000;
/** Characters of crawl observation kept: enough for a few whole corpus pages. */
const CRAWL_MAX_CHARS = 50_000;
const CRAWL_MAX_URLS = 10;

/** The tools over the corpus (index built or reused), with `print` taking the index line. */
async function toolConfig(
  flags: z.infer<typeof ToolFlags>,
  maxBodyBytes: number,
  print: (line: string) => void,
): Promise<{ cfg: ToolServerConfig; summarizer?: ModelClient }> {
  const index = await indexCorpus(flags.corpus, {}, print);
  const apiKey = modelApiKey();
  const summarizer = flags.summarizer ? await openModel(flags.summarizer, { apiKey }) : undefined;
  const backend = createBackend({
    index,
    summarizer,
    sandbox: { unsafeNoSandbox: flags.unsafeNoSandbox },
    codeConcurrency: flags.codeConcurrency,
    crawlMaxUrls: CRAWL_MAX_URLS,
    crawlMaxChars: CRAWL_MAX_CHARS,
  });
  const cfg = {
    backend,
    defaultTopk: flags.topk,
    timeoutMs: Math.round(flags.toolTimeout * 1000),
    maxBodyBytes,
  };
  return { cfg, summarizer };
}

function stopOnSignal(stop: () => Promise<void>): void {
  const once = () => void stop().then(() => process.exit(0));
  process.once("SIGINT", once);
  process.once("SIGTERM", once);
}

const SERVE_EXAMPLES = `
Routes: POST /retrieve (Search-R1), /search (Serper), /crawl_page (AFM), /run_code (sandbox-fusion),
/score, /mcp (MCP streamable HTTP); GET /health. See docs/tool-servers.md.

With --afm-ports: ${AFM_PORTS.map((p) => `${p.port} ${p.routes.join(", ")}`).join("; ")}.

Examples:
  coa tools serve --corpus runs/world/corpus.jsonl
  curl -s localhost:8000/retrieve -d '{"queries":["Veltmoor mayor"],"topk":3,"return_scores":true}'
  coa tools serve --corpus wiki.jsonl --afm-ports --summarizer http://127.0.0.1:8001/v1`;

const MCP_EXAMPLES = `
Speaks MCP on stdin/stdout (tools: retrieve, search, crawl_page, run_code); messages go to stderr.

Examples:
  coa tools mcp --corpus runs/world/corpus.jsonl
  claude mcp add coa-tools -- npx coa tools mcp --corpus "$PWD/runs/world/corpus.jsonl"`;

function toolOptions(cmd: Command): Command {
  return cmd
    .requiredOption(
      "--corpus <jsonl>",
      "JSONL corpus {id,title,text,url?} the search, retrieval and crawl tools read",
    )
    .option("--topk <n>", "documents per /retrieve query when the request gives no topk (default 3)")
    .option("--summarizer <spec>", "model that condenses crawled pages to what the request's task needs")
    .option(
      "--tool-timeout <seconds>",
      "longest one request may take; a tool still busy then gets a 504 (default 120)",
    )
    .option(
      "--code-concurrency <n>",
      "sandboxed programs running at once (default: the CPUs coa may use, at most a CPU quota's)",
    )
    .option("--unsafe-no-sandbox", "run /run_code programs without bubblewrap");
}

export function register(program: Command): void {
  const tools = program
    .command("tools")
    .description("serve coa's tools to trainers and agents: AFM/Search-R1/verl HTTP routes and MCP");

  toolOptions(
    tools.command("serve").description("serve the tools over HTTP on loopback (AFM, verl and MCP clients)"),
  )
    .option("--port <n>", `port to listen on (default ${DEFAULT_PORT}; 0 picks a free one)`)
    .option("--host <addr>", "address to bind", "127.0.0.1")
    .option("--afm-ports", "one listener per AFM port: retrieve 8000, crawl_page 9000, search 9001")
    .option("--max-body-mb <n>", "largest request body in MiB (default 4)")
    .addHelpText("after", SERVE_EXAMPLES)
    .action(async (raw: Record<string, unknown>) => {
      const flags = parseFlags(ServeFlags, raw);
      const log = (line: string) => process.stdout.write(`${line}\n`);
      const { cfg, summarizer } = await toolConfig(flags, Math.round(flags.maxBodyMb * 1024 ** 2), log);
      const servers: RunningToolServer[] = flags.afmPorts
        ? await startAfmServers(cfg, flags.host)
        : [
            await startToolServer(cfg, {
              host: flags.host,
              port: flags.port ?? DEFAULT_PORT,
              routes: ROUTES,
            }),
          ];
      for (const s of servers)
        log(`coa tools: ${s.url} serves ${s.routes.map((r) => `/${r}`).join(" ")} /health`);
      log("(Ctrl-C to stop)");
      stopOnSignal(async () => {
        await Promise.all(servers.map((s) => s.close()));
        await summarizer?.close?.();
      });
    });

  toolOptions(tools.command("mcp").description("serve the tools as an MCP server over stdio"))
    .addHelpText("after", MCP_EXAMPLES)
    .action(async (raw: Record<string, unknown>) => {
      const flags = parseFlags(ToolFlags, raw);
      // stdout carries the protocol; anything else written there would corrupt it.
      const log = (line: string) => process.stderr.write(`${line}\n`);
      const { cfg, summarizer } = await toolConfig(flags, 0, log);
      const server = createMcpServer(cfg.backend, cfg);
      await server.connect(new StdioServerTransport());
      log("coa tools mcp: ready on stdio");
      stopOnSignal(async () => {
        await server.close();
        await summarizer?.close?.();
      });
    });
}
