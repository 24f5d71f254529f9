import type { Handler } from "hono";
import { z } from "zod";
import { type PythonRun, SandboxUnavailableError } from "../tools/index.js";
import type { ToolBackend } from "./backend.js";
import { withinDeadline } from "./deadline.js";
import { ApiError, readBody } from "./errors.js";

const MAX_RUN_TIMEOUT_S = 300;
const MAX_MEMORY_MB = 16_384;
/** sandbox-fusion's defaults when a request leaves the limits out. */
const DEFAULT_RUN_TIMEOUT_S = 10;
const DEFAULT_MEMORY_MB = 1024;

const empty = (v: object | undefined) => v === undefined || Object.keys(v).length === 0;

/**
 * sandbox-fusion's `run_code` request as verl sends it. coa runs Python only, so there is nothing to
 * compile (`compile_timeout` is read and unused) and no files to place: non-empty `files` or
 * `fetch_files` are refused rather than silently dropped.
 */
export const RunCodeRequest = z.strictObject({
  code: z.string().min(1).max(1_000_000),
  stdin: z.string().nullish(),
  language: z.string().default("python"),
  run_timeout: z.number().positive().max(MAX_RUN_TIMEOUT_S).default(DEFAULT_RUN_TIMEOUT_S),
  compile_timeout: z.number().nonnegative().nullish(),
  memory_limit_MB: z.number().int().positive().max(MAX_MEMORY_MB).default(DEFAULT_MEMORY_MB),
  files: z.record(z.string(), z.string()).optional().refine(empty, "files are not supported"),
  fetch_files: z.array(z.string()).optional().refine(empty, "fetch_files are not supported"),
});

const STOPPED: Record<string, string> = {
  wall_timeout: "time limit reached",
  cpu_limit: "CPU time limit reached",
  memory_limit: "memory limit reached",
  output_limit: "output limit reached",
  file_size_limit: "file size limit reached",
  aborted: "cancelled",
};

/**
 * A sandbox run as sandbox-fusion reports it: `Success` only for a program that exited 0; a time limit
 * is `TimeLimitExceeded`, any other kill `Error`, the reason in `message`.
 */
export function sandboxFusionResult(run: PythonRun) {
  const timeLimit = run.killedBy === "wall_timeout" || run.killedBy === "cpu_limit";
  const runStatus = run.killedBy === null ? "Finished" : timeLimit ? "TimeLimitExceeded" : "Error";
  return {
    status: runStatus === "Finished" && run.exitCode === 0 ? "Success" : "Failed",
    message: run.killedBy === null ? "" : (STOPPED[run.killedBy] ?? `killed by ${run.killedBy}`),
    compile_result: null,
    run_result: {
      status: runStatus,
      execution_time: run.elapsedMs / 1000,
      return_code: run.exitCode,
      stdout: run.stdout,
      stderr: run.stderr,
    },
    files: {},
  };
}

/** The sandbox-fusion answer for a run that never started (unsupported language, no sandbox here). */
export const sandboxError = (message: string) => ({
  status: "SandboxError",
  message,
  compile_result: null,
  run_result: null,
  files: {},
});

export const runCodeHandler =
  (backend: ToolBackend, opts: { timeoutMs: number }): Handler =>
  async (c) => {
    const req = await readBody(c, RunCodeRequest);
    if (req.language !== "python") {
      return c.json(
        sandboxError(`coa's sandbox runs python only; language "${req.language}" is not supported`),
      );
    }
    const wallMs = Math.round(req.run_timeout * 1000);
    if (wallMs >= opts.timeoutMs) {
      throw new ApiError(
        400,
        "invalid_request_error",
        `run_timeout: must be under this server's tool timeout of ${opts.timeoutMs / 1000} s`,
      );
    }
    try {
      const run = await withinDeadline(c, opts.timeoutMs, (signal) =>
        backend.runCode(
          {
            code: req.code,
            stdin: req.stdin ?? undefined,
            wallMs,
            memoryBytes: req.memory_limit_MB * 1024 ** 2,
          },
          signal,
        ),
      );
      return c.json(sandboxFusionResult(run));
    } catch (err) {
      if (err instanceof SandboxUnavailableError) return c.json(sandboxError(err.message));
      throw err;
    }
  };
