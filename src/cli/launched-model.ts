import { type EngineLaunch, launchModel, type OpenModelOptions } from "../model/index.js";
import { takeEarlyLaunch } from "./early-launch.js";

/**
 * Runs a command's `body` with the engine its `--model` names already starting (`launchModel`; nothing
 * for a server), so that the engine's start (~2 s, mostly Python importing torch) overlaps the loading
 * of the modules `body` imports; a command module that calls this imports none of them itself. The
 * engine `coa` started before the command loaded (`startEarlyLaunch`) is taken over where it is the
 * same; else it is stopped. The launch is cancelled (the engine killed) if `body` ends without having
 * opened it.
 */
export async function withLaunchedModel<T>(
  spec: string,
  options: Pick<OpenModelOptions, "engine" | "timeoutMs">,
  body: (launched: EngineLaunch | undefined) => Promise<T>,
): Promise<T> {
  const early = takeEarlyLaunch();
  const launched = launchModel(spec, options, early);
  void early?.cancel(); // nothing once adopted: `launched` holds that engine then
  try {
    return await body(launched);
  } finally {
    await launched?.cancel();
  }
}
