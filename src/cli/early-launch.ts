import { EngineLaunch, parseModelSpec } from "../model/launch/index.js";

// `coa eval|run|serve --model engine…` starts its engine from the raw arguments, before its command's
// modules load (~0.3 s of zod, the protocol and the model's clients in an installed `coa`), since the
// engine's own start (~2 s, mostly Python importing torch) is what the command waits for first. The
// command takes it over once its flags are parsed (`withLaunchedModel`), or it is stopped.

/** The one launch of this process that no command has taken yet. */
let early: EngineLaunch | undefined;

/**
 * The `--model` value among a command's arguments as commander reads it (the last one given, before
 * any `--`); undefined without one, and where they ask for help rather than a run.
 */
export function modelArgument(args: readonly string[]): string | undefined {
  let spec: string | undefined;
  for (const [i, arg] of args.entries()) {
    if (arg === "--") break;
    if (arg === "-h" || arg === "--help") return undefined;
    if (arg === "--model") spec = args[i + 1];
    else if (arg.startsWith("--model=")) spec = arg.slice("--model=".length);
  }
  return spec;
}

/** Starts the engine that `args`' `--model` names, where it names one; a malformed value is left to the command. */
export function startEarlyLaunch(args: readonly string[]): void {
  const spec = modelArgument(args);
  if (early || !spec) return;
  let parsed: ReturnType<typeof parseModelSpec>;
  try {
    parsed = parseModelSpec(spec);
  } catch {
    return;
  }
  if (parsed.kind === "engine") early = EngineLaunch.start(parsed.source);
}

/** The early launch for its one taker (`launchModel` adopts it where it is the same process). */
export function takeEarlyLaunch(): EngineLaunch | undefined {
  const launch = early;
  early = undefined;
  return launch;
}

/** Stops an early launch that no command took (its flags failed before, or it did not start one). */
export async function stopEarlyLaunch(): Promise<void> {
  await takeEarlyLaunch()?.cancel();
}
