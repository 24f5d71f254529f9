import { z } from "zod";
import { extractCode } from "../protocol/index.js";
import { guardTool, type ToolOutcome } from "./guard.js";
import {
  type PythonRun,
  probeSandbox,
  runPython,
  SandboxLimits,
  type SandboxOptions,
  SandboxUnavailableError,
} from "./sandbox.js";
import { type Tool, ToolArgsError } from "./types.js";

export const CodeArgs = z.object({ code: z.string().min(1), stdin: z.string().optional() });
export type CodeArgs = z.infer<typeof CodeArgs>;

export interface CodeToolOptions {
  sandbox?: SandboxOptions;
  limits?: Partial<SandboxLimits>;
}

/** The code tool keeps less output than a bare run: the model reads every character of it. */
const TOOL_OUTPUT_BYTES = 64 * 1024;
/** The sandbox's own wall timer fires this long before the tool's deadline, so it names the cause. */
const DEADLINE_MARGIN_MS = 250;

const mib = (bytes: number) => `${Math.round(bytes / 1024 ** 2)} MiB`;

function stopReason(run: PythonRun, limits: SandboxLimits): string | null {
  switch (run.killedBy) {
    case null:
      return run.exitCode === 0 ? null : `[exit code ${run.exitCode}]`;
    case "wall_timeout":
      return `[killed: time limit of ${limits.wallMs / 1000} s reached]`;
    case "cpu_limit":
      return `[killed: CPU time limit of ${limits.cpuSeconds} s reached]`;
    case "memory_limit":
      return `[stopped: memory limit of ${mib(limits.memoryBytes)} reached]`;
    case "output_limit":
      return `[killed: output limit of ${limits.outputBytes} bytes reached]`;
    case "file_size_limit":
      return `[killed: file size limit of ${mib(limits.fileBytes)} reached]`;
    case "aborted":
      return "[killed: the call was cancelled]";
    default:
      return `[killed by ${run.killedBy.replace("signal:", "signal ")}]`;
  }
}

/** What the model sees: stdout, then stderr, then a bracketed line saying how the program ended. */
export function formatRun(run: PythonRun, limits: SandboxLimits): ToolOutcome {
  const parts: string[] = [];
  if (run.stdout.trimEnd()) parts.push(run.stdout.trimEnd());
  if (run.stderr.trimEnd()) parts.push(`stderr:\n${run.stderr.trimEnd()}`);
  const reason = stopReason(run, limits);
  if (reason) parts.push(reason);
  const text = parts.length ? parts.join("\n") : "(no output)";
  if (reason === null) return { ok: true, text };
  const error = run.killedBy === "wall_timeout" ? "timeout" : (run.killedBy ?? "exit_code");
  return { ok: false, error, text };
}

/** `code`: runs the call's fenced Python block (and optional ```stdin block) in the sandbox. */
export function createCodeTool(opts: CodeToolOptions = {}): Tool<CodeArgs> {
  return {
    tag: "code",
    description:
      "Run a Python program (```python block, optional ```stdin block) in a sandbox without network.",
    argsSchema: CodeArgs,
    parseArgs(raw) {
      const extracted = extractCode(raw);
      if (!extracted || extracted.code.trim() === "") {
        throw new ToolArgsError(
          "No Python program found. Put it in a fenced block inside the tag: <code>```python\nprint(1)\n```</code> " +
            "(input for it, if any, in a ```stdin block).",
        );
      }
      return extracted;
    },
    async prepare() {
      if (!opts.sandbox?.unsafeNoSandbox) await probeSandbox(opts.sandbox);
    },
    run(args, ctx) {
      return guardTool(ctx, async (signal) => {
        const limits = SandboxLimits.parse({
          outputBytes: TOOL_OUTPUT_BYTES,
          ...opts.limits,
          wallMs: Math.floor(
            Math.max(100, Math.min(opts.limits?.wallMs ?? Infinity, ctx.timeoutMs - DEADLINE_MARGIN_MS)),
          ),
        });
        // Programs read lines; a last line without its newline trips some of them.
        const stdin = args.stdin === undefined || args.stdin.endsWith("\n") ? args.stdin : `${args.stdin}\n`;
        try {
          const run = await runPython({ code: args.code, stdin, limits, options: opts.sandbox, signal });
          return formatRun(run, limits);
        } catch (err) {
          if (err instanceof SandboxUnavailableError)
            return { ok: false, error: "sandbox_refused", text: err.message };
          throw err;
        }
      });
    },
  };
}
