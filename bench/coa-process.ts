// Runs this checkout's `coa` (the TypeScript source through tsx) as a child process for the
// benchmarks that time whole commands.

import { spawn } from "node:child_process";
import { fileURLToPath } from "node:url";

const REPO = fileURLToPath(new URL("..", import.meta.url));

export interface CoaRun {
  /** The command line as a user would type it. */
  command: string;
  code: number | null;
  minutes: number;
  /** Everything it printed, stdout and stderr interleaved. */
  output: string;
}

export interface CoaWatch {
  /** Called with the process's id once it is started. */
  onStart?: (pid: number) => void;
  /** Sees each piece of output as it comes, with the seconds since the start. */
  onOutput?: (text: string, seconds: number) => void;
}

export async function runCoa(args: readonly string[], { onStart, onOutput }: CoaWatch = {}): Promise<CoaRun> {
  const started = performance.now();
  const log: string[] = [];
  const take = (d: Buffer) => {
    log.push(String(d));
    onOutput?.(String(d), (performance.now() - started) / 1000);
  };
  const code = await new Promise<number | null>((resolve) => {
    const child = spawn(process.execPath, ["--import", "tsx", "src/cli/main.ts", ...args], {
      cwd: REPO,
      stdio: ["ignore", "pipe", "pipe"],
    });
    if (child.pid !== undefined) onStart?.(child.pid);
    child.stdout.on("data", take);
    child.stderr.on("data", take);
    child.on("exit", resolve);
  });
  return {
    command: `coa ${args.join(" ")}`,
    code,
    minutes: (performance.now() - started) / 60_000,
    output: log.join(""),
  };
}
