import { appendFile, mkdir } from "node:fs/promises";
import { dirname, join } from "node:path";
import pc from "picocolors";
import {
  type EngineLaunch,
  type ModelClient,
  parseModelSpec,
  saveTokenizerOf,
  unavailableModel,
} from "../../model/index.js";
import { type Step, Trajectory } from "../../protocol/index.js";
import { type RunEvent, runAgent } from "../../runtime/index.js";
import {
  agentBudget,
  agentPrompt,
  agentSampling,
  maxTimeMs,
  openAgentModel,
  toolTimeoutMs,
} from "../agent-flags.js";
import { openAgentTools } from "../agent-tools.js";
import { modelApiKey } from "../flags.js";
import type { RunFlags } from "./run.js";

/**
 * Runs one episode as `coa run` does, printing through `print`; returns the record it appended. With
 * `launched` (`launchModel` of `flags.model`), takes that engine over instead of starting one.
 */
export async function runQuestion(
  question: string,
  flags: RunFlags,
  print: (line: string) => void,
  launched?: EngineLaunch,
): Promise<Trajectory> {
  // For a server the episode's clock starts now: finding the model name (GET /v1/models) counts
  // against --max-time. Starting the embedded engine (a process, not a request) does not.
  const spec = parseModelSpec(flags.model); // a malformed --model is the user's error, not an episode's
  const startedAt = spec.kind === "http" ? performance.now() : undefined;
  const timeLimitMs = maxTimeMs(flags);
  let model: ModelClient;
  try {
    model = await openAgentModel(
      flags,
      modelApiKey(flags.apiKey),
      AbortSignal.timeout(timeLimitMs),
      (line) => print(pc.yellow(line)),
      launched,
    );
  } catch (err) {
    // Recorded like any episode whose model fails: model_error, or max_time once the time is spent.
    model = unavailableModel(flags.modelName ?? flags.model, err);
  }
  try {
    const tools = await openAgentTools(flags, print);
    print(
      pc.dim(
        `model ${model.name} · profile ${flags.profile} · tools ${[...tools.keys()].join(", ") || "none"}`,
      ),
    );
    const trajectory = await runAgent({
      model,
      tools,
      profile: flags.profile,
      ...(await agentPrompt(flags)),
      question,
      taskId: flags.taskId,
      budget: agentBudget(flags),
      startedAt,
      sampling: agentSampling(flags),
      toolTimeoutMs: toolTimeoutMs(flags),
      onEvent: (event) => {
        const line = formatEvent(event);
        if (line !== null) print(line);
      },
    });
    await mkdir(dirname(flags.out), { recursive: true });
    await appendFile(flags.out, `${JSON.stringify(Trajectory.parse(trajectory))}\n`);
    // Named by the vocabulary: models of several vocabularies may append to one file.
    await saveTokenizerOf(model, join(dirname(flags.out), `${trajectory.tokenizer}.tokenizer.json`));
    print(pc.dim(`trajectory appended to ${flags.out}`));
    return trajectory;
  } finally {
    await model.close?.();
  }
}

const LABEL_WIDTH = 18;
const MAX_SHOWN = 600;

const STEP_COLORS: Record<Step["type"], (s: string) => string> = {
  think: pc.gray,
  plan: pc.cyan,
  reflection: pc.blue,
  suggested_answer: pc.green,
  double_check: pc.magenta,
  answer: (s) => pc.bold(pc.green(s)),
  tool_call: pc.yellow,
  observation: pc.dim,
};

/** One printable line (possibly multi-line) per event worth showing; null for the rest. */
export function formatEvent(event: RunEvent): string | null {
  switch (event.type) {
    case "step": {
      const { step } = event;
      const label = step.type === "tool_call" ? step.tool : step.type;
      const text = step.type === "tool_call" ? step.args : step.text;
      const score = step.type === "double_check" ? ` [score ${step.score ?? "?"}]` : "";
      return `${STEP_COLORS[step.type](label.padEnd(LABEL_WIDTH))}${indent(clip(text))}${score}`;
    }
    case "tool_end": {
      const { observation: o } = event;
      const what = event.duplicate
        ? "repeat, answered from memory"
        : o.ok
          ? "ok"
          : `failed: ${o.error ?? "error"}`;
      const paint = o.ok ? pc.dim : pc.red;
      return paint(`${"".padEnd(LABEL_WIDTH)}(${event.tool} ${what}, ${Math.round(o.elapsedMs)} ms)`);
    }
    case "format_error":
      return pc.red(
        `${"format error".padEnd(LABEL_WIDTH)}${event.errors.map((e) => e.message).join("; ")} (${event.total} so far)`,
      );
    case "finish": {
      const { stats } = event.trajectory;
      const tools = Object.entries(stats.toolCalls)
        .map(([tool, n]) => `${tool}×${n}`)
        .join(" ");
      const { error: failure } = event.trajectory.meta.runtime;
      const error = failure === undefined ? "" : `\n${pc.red(failure)}`;
      return (
        [
          "",
          `${pc.bold("final answer".padEnd(LABEL_WIDTH))}${event.answer === null ? pc.red("(none)") : pc.bold(event.answer)}`,
          pc.dim(
            `finish ${event.finishReason} · ${stats.turns} turns · tools ${tools || "none"} · ` +
              `${stats.modelTokens} model + ${stats.toolTokens} tool tokens · ${(stats.wallMs / 1000).toFixed(1)} s`,
          ),
        ].join("\n") + error
      );
    }
    default:
      return null;
  }
}

const clip = (text: string) => (text.length > MAX_SHOWN ? `${text.slice(0, MAX_SHOWN)}…` : text);
const indent = (text: string) => text.replaceAll("\n", `\n${"".padEnd(LABEL_WIDTH)}`);
