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

/** `onOutput` sees each piece of output as it comes, with the seconds since the start. */
export async function runCoa(
  args: readonly string[],
  onOutput?: (text: string, seconds: number) => void,
): Promise<CoaRun> {
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
