// Runs this checkout's `coa` as a child process for the benchmarks that time whole commands: `bin/coa.js`,
// which an installed package runs, over the compiled CLI (dist/, built first where any source is newer).
// COA_BENCH_TSX=1 runs the TypeScript sources through tsx instead, as `npm run coa` does: ~0.7 s more per
// command here (tsx's start and its transform of each module; docs/engine.md, stop 65).

import { execFileSync, spawn } from "node:child_process";
import { readdirSync, statSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";

const REPO = fileURLToPath(new URL("..", import.meta.url));
const BUILT_CLI = join(REPO, "dist", "cli", "main.js");

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

/** How the benchmarks run coa: the compiled CLI (default) or the sources through tsx. */
export function coaEntry(): "built" | "tsx" {
  return process.env.COA_BENCH_TSX === "1" ? "tsx" : "built";
}

/** The latest modification time of any file under `dir`, in ms. */
function newest(dir: string): number {
  let latest = 0;
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    latest = Math.max(latest, entry.isDirectory() ? newest(path) : statSync(path).mtimeMs);
  }
  return latest;
}

let built = false;

/** Builds dist/ (`npm run build`) unless it is newer than every file under src/ and package.json. */
function ensureBuilt(): void {
  if (built) return;
  const sources = Math.max(newest(join(REPO, "src")), statSync(join(REPO, "package.json")).mtimeMs);
  let compiled = 0;
  try {
    compiled = statSync(BUILT_CLI).mtimeMs;
  } catch {}
  if (compiled < sources) {
    console.log("(building dist/ first: npm run build)");
    execFileSync("npm", ["run", "build"], { cwd: REPO, stdio: ["ignore", "ignore", "inherit"] });
  }
  built = true;
}

export async function runCoa(args: readonly string[], { onStart, onOutput }: CoaWatch = {}): Promise<CoaRun> {
  const tsx = coaEntry() === "tsx";
  if (!tsx) ensureBuilt();
  const entry = tsx ? ["--import", "tsx", "src/cli/main.ts"] : ["bin/coa.js"];
  const started = performance.now();
  const log: string[] = [];
  const take = (d: Buffer) => {
    log.push(String(d));
    onOutput?.(String(d), (performance.now() - started) / 1000);
  };
  const code = await new Promise<number | null>((resolve) => {
    const child = spawn(process.execPath, [...entry, ...args], {
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
