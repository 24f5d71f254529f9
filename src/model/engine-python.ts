import { execFile } from "node:child_process";
import { existsSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";

const run = promisify(execFile);

export const TORCH_INSTALL_HINT =
  "On Debian/Ubuntu: sudo apt-get install python3-torch libopenblas0-pthread (without OpenBLAS, Debian's " +
  "torch is about ten times slower). Elsewhere: install torch >= 1.13 for Python >= 3.11 and set " +
  "COA_PYTHON=/path/to/that/python.";

export interface PythonWithTorch {
  python: string;
  /** Where that interpreter finds torch (its package's folder). */
  torchDir: string;
}

/** Candidates in order: COA_PYTHON alone when set, else Debian's interpreter, then whatever is on PATH. */
export function pythonCandidates(env: NodeJS.ProcessEnv = process.env): string[] {
  if (env.COA_PYTHON) return [env.COA_PYTHON];
  return ["/usr/bin/python3", "python3", "python"];
}

const found = new Map<string, Promise<PythonWithTorch>>();

/** Whether torch is installed for this interpreter, and where, without importing it: importing torch
 * takes about 2 s on this project's machines and the engine imports it again right after, so a probe
 * that imported it made every engine start longer (`coa eval` opened its engine in 3.4 s with it, 2.0 s
 * with this probe). Nor does it ask for torch's version: `importlib.metadata` scanning every installed
 * package's metadata took 70 of the probe's 100 ms (the engine reports the version itself, `/info`). A
 * torch that is present but broken fails the engine's own start instead, with its traceback. */
const PROBE = [
  "import importlib.util, os, sys",
  "spec = importlib.util.find_spec('torch')",
  "if spec is None or not spec.origin: sys.exit(\"No module named 'torch'\")",
  "print(os.path.dirname(spec.origin))",
].join("\n");

/** The first candidate that has torch; the answer is remembered for the life of the process. */
export function findPython(candidates: string[] = pythonCandidates()): Promise<PythonWithTorch> {
  const key = candidates.join("\0");
  let result = found.get(key);
  if (!result) {
    result = probe(candidates);
    found.set(key, result);
    result.catch(() => found.delete(key));
  }
  return result;
}

/**
 * Starts `start` with the first candidate at once rather than after probing for torch (`findPython`,
 * ~0.1 s on the path of every `coa eval`'s start), holding its log lines until it is ready. If it fails
 * (no torch there, or no such interpreter), the probe finds the interpreter that has torch and the start
 * is tried once more with that one; where the probe finds the same one, the first failure is the answer.
 */
export async function startWithPython<T>(
  candidates: string[],
  start: (python: string, onLog: (line: string) => void) => Promise<T>,
  log: (line: string) => void,
  signal?: AbortSignal,
): Promise<T> {
  const [first] = candidates;
  const held: string[] = [];
  let ready = false;
  try {
    const started = await start(first, (line) => {
      if (ready) log(line);
      else held.push(line);
    });
    ready = true;
    for (const line of held) log(line);
    return started;
  } catch (err) {
    signal?.throwIfAborted();
    const { python } = await findPython(candidates);
    if (python === first) throw err;
    signal?.throwIfAborted();
    return start(python, log);
  }
}

async function probe(candidates: string[]): Promise<PythonWithTorch> {
  const tried: string[] = [];
  for (const python of candidates) {
    try {
      const { stdout } = await run(python, ["-c", PROBE], {
        timeout: 120_000,
      });
      return { python, torchDir: stdout.trim() };
    } catch (err) {
      const e = err as NodeJS.ErrnoException & { stderr?: string };
      const why = e.code === "ENOENT" ? "not found" : (e.stderr?.trim().split("\n").at(-1) ?? e.message);
      tried.push(`${python} (${why})`);
    }
  }
  throw new Error(`No Python with PyTorch found; tried ${tried.join(", ")}. ${TORCH_INSTALL_HINT}`);
}

/** The folder holding the `coa_engine` package, found upward from this module (src/ or dist/). */
export function engineRoot(): string {
  let dir = path.dirname(fileURLToPath(import.meta.url));
  for (;;) {
    const candidate = path.join(dir, "engine");
    if (existsSync(path.join(candidate, "coa_engine", "__main__.py"))) return candidate;
    const parent = path.dirname(dir);
    if (parent === dir) throw new Error("engine/coa_engine not found above the coa installation");
    dir = parent;
  }
}
