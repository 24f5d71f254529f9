import { describe, expect, it } from "vitest";
import { z } from "zod";
import { ByteTokenizer } from "../model/index.js";
import { ScriptedModel } from "../model/testing/index.js";
import { renderPrompt } from "../protocol/index.js";
import type { Tool } from "../tools/index.js";
import { runAgent } from "./agent.js";
import { ranToolCalls } from "./text.js";

const bytes = new ByteTokenizer();
const decode = (ids: number[]) => bytes.decode(ids);

const search: Tool<string> = {
  tag: "web_search",
  description: "echo",
  argsSchema: z.string(),
  parseArgs: (raw) => raw.trim(),
  run: async (q) => ({ text: `results for ${q}`, ok: true, truncated: false, elapsedMs: 0 }),
};

const turns = [
  // Stray text: fed back, not run.
  "Let me look. <web_search>Freedonia</web_search>",
  "<think>Search.</think>\n<web_search>capital of Freedonia</web_search>",
  "<reflection>The page names it.</reflection>\n<web_search>Fredville</web_search>",
  "<think>Done.</think>\n<answer>Fredville</answer>",
];
const question = "What is the capital of Freedonia?";

/** Calls of 16 tokens, so every turn is cut for length and continued, as a real model continues. */
function episode() {
  const prompt = renderPrompt({ profile: "web", question });
  const model = new ScriptedModel(({ prompt: seen }) => {
    // Each observation closes a turn; what follows the last one is the current turn so far.
    const parts = seen.slice(prompt.length).split("</observation>\n");
    return turns[parts.length - 1]!.slice(parts.at(-1)!.length);
  });
  return runAgent({
    model,
    tools: new Map([["web_search", search]]),
    profile: "web",
    question,
    sampling: { maxTokensPerTurn: 16 },
  });
}

describe("ranToolCalls", () => {
  it("reads back the calls the runtime ran, skipping turns fed back for format errors", async () => {
    const traj = await episode();
    expect(traj).toMatchObject({ finishReason: "answer", stats: { formatErrors: 2 } }); // stray text, and a call first
    const { calls } = traj.meta.runtime;
    expect(calls.filter((c) => c.finishReason === "length").length).toBeGreaterThan(3);
    expect(await ranToolCalls(traj, decode)).toEqual([
      { tool: "web_search", args: "capital of Freedonia" },
      { tool: "web_search", args: "Fredville" },
    ]);
    expect(await ranToolCalls(traj, decode, 1)).toHaveLength(1);
  });

  it("without meta.runtime.calls, counts every turn an observation follows", async () => {
    const calls = await ranToolCalls({ ...(await episode()), meta: {} }, decode);
    expect(calls.map((c) => c.args)).toEqual(["Freedonia", "capital of Freedonia", "Fredville"]);
  });
});
