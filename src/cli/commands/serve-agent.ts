import { dirname, join } from "node:path";
import pc from "picocolors";
import { type EngineLaunch, saveTokenizerOf } from "../../model/index.js";
import { AgentRunner, startServe, TrajectoryStore } from "../../serve/index.js";
import { agentBudget, agentPrompt, agentSampling, openAgentModel, toolTimeoutMs } from "../agent-flags.js";
import { openAgentTools } from "../agent-tools.js";
import { modelApiKey } from "../flags.js";
import type { ServeFlags } from "./serve.js";

/**
 * Opens the model and tools the flags name and serves the agent; the server speaks the model's
 * `--dialect` with its `--system-prompt-file`, as `coa run` and `coa eval` do. With `launched`
 * (`launchModel` of `flags.model`), takes that engine over instead of starting one. If anything after
 * the model fails (the tools, the log, the port), the model is closed before the error is rethrown,
 * so an engine it started does not outlive the call.
 */
export async function serveAgent(flags: ServeFlags, print: (line: string) => void, launched?: EngineLaunch) {
  const model = await openAgentModel(
    flags,
    modelApiKey(flags.modelApiKey),
    undefined,
    (line) => print(pc.yellow(line)),
    launched,
  );
  try {
    return await serveWith(model, flags, print);
  } catch (error) {
    await model.close?.();
    throw error;
  }
}

async function serveWith(
  model: Awaited<ReturnType<typeof openAgentModel>>,
  flags: ServeFlags,
  print: (line: string) => void,
) {
  const tools = await openAgentTools(flags, print);
  const store = await TrajectoryStore.open(flags.log);
  // The log's ids are only readable with their vocabulary, as for `coa run`.
  await saveTokenizerOf(model, join(dirname(flags.log), `${model.tokenizer}.tokenizer.json`));
  const agent = new AgentRunner({
    model,
    tools,
    profile: flags.profile,
    prompt: await agentPrompt(flags),
    budget: agentBudget(flags),
    sampling: agentSampling(flags),
    toolTimeoutMs: toolTimeoutMs(flags),
    concurrency: flags.concurrency,
    store,
  });
  const server = await startServe({
    agent,
    host: flags.host,
    port: flags.port,
    apiKey: flags.apiKey ?? process.env.COA_SERVE_API_KEY,
  });
  print(
    `coa serve: ${pc.bold(model.name)} (profile ${flags.profile}, dialect ${flags.dialect}, tools ${[...tools.keys()].join(", ") || "none"}) ` +
      `at ${server.url} · trajectories → ${flags.log} (Ctrl-C to stop)`,
  );
  return { server, model };
}
