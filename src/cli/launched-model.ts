import { type EngineLaunch, launchModel, type OpenModelOptions } from "../model/index.js";

/**
 * Runs a command's `body` with the engine its `--model` names already starting (`launchModel`; nothing
 * for a server), so that the engine's start (~2 s, mostly Python importing torch) overlaps the loading
 * of the modules `body` imports; a command module that calls this imports none of them itself. The
 * launch is cancelled (the engine killed) if `body` ends without having opened it.
 */
export async function withLaunchedModel<T>(
  spec: string,
  options: Pick<OpenModelOptions, "engine" | "timeoutMs">,
  body: (launched: EngineLaunch | undefined) => Promise<T>,
): Promise<T> {
  const launched = launchModel(spec, options);
  try {
    return await body(launched);
  } finally {
    await launched?.cancel();
  }
}
