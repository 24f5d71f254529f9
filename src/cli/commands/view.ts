import type { Command } from "commander";
import { startViewer } from "../../server/index.js";

export function register(program: Command): void {
  program
    .command("view")
    .description(
      "serve a local page that lists trajectories and MAS traces (from run, teach, distill, eval) and shows each one",
    )
    .argument("<paths...>", "JSONL files or run folders (searched for *.jsonl)")
    .option("--port <n>", "port to listen on (0 picks a free one)", "8377")
    .option("--host <addr>", "address to bind", "127.0.0.1")
    .action(async (paths: string[], opts: { port: string; host: string }) => {
      const viewer = await startViewer({ paths, port: Number(opts.port), host: opts.host });
      process.stdout.write(`coa view: ${viewer.records} records at ${viewer.url} (Ctrl-C to stop)\n`);
      const stop = () => void viewer.close().then(() => process.exit(0));
      process.once("SIGINT", stop);
      process.once("SIGTERM", stop);
    });
}
