import { beforeAll, describe, expect, it } from "vitest";
import { z } from "zod";
import { ByteTokenizer } from "../model/index.js";
import { ScriptedModel } from "../model/testing/index.js";
import type { ToolTag, Trajectory } from "../protocol/index.js";
import { runAgent } from "../runtime/index.js";
import type { Task } from "../tasks/index.js";
import { type Driver, runEpisode, type Toolbox } from "../teacher/index.js";
import { type WorldFixture, worldFixture } from "../teacher/testing.js";
import type { Tool } from "../tools/index.js";
import { buildTrajectory } from "./build.js";
import { convertTrace } from "./convert.js";

// The student is distilled from the teacher's observations and reads the runtime's at inference:
// for the same tool calls, the two must be the same text.

const bytes = new ByteTokenizer();
const MAX_CHARS = 600;

/** A web_search whose run never returns normally: it throws, or hangs until abandoned. */
function brokenSearch(run: () => Promise<never>): Tool<string> {
  return {
    tag: "web_search",
    description: "a broken search",
    argsSchema: z.string(),
    parseArgs: (raw) => raw,
    run,
  };
}

/** The team, scripted: one sub-task in which the worker makes `calls`, then the answer. */
function scriptedTeam(calls: readonly string[]): Driver {
  return {
    name: "expert",
    model: "scripted",
    tokenizer: bytes.name,
    episode: () => {
      const work = [...calls.map((call) => `I call the tool.\n${call}`), "REPORT: done"];
      const next = [calls[0].startsWith("<code>") ? "CODE: compute it" : "SEARCH: look it up", "ANSWER: x"];
      const replies: Record<string, () => string | undefined> = {
        plan: () => "1. Look it up.",
        next: () => next.shift(),
        work: () => work.shift(),
        verify: () => "Plausible. Score: 5",
      };
      return {
        call: async ({ purpose }) => {
          const text = replies[purpose]?.();
          return text === undefined ? null : { text, tokensIn: 0, tokensOut: 0, ms: 0 };
        },
      };
    },
  };
}

/** The observation segments of a trajectory, as text. */
const observations = (trajectory: Trajectory) =>
  trajectory.segments.filter((s) => s.source === "tool").map((s) => bytes.decode(s.ids));

async function distilledObservations(task: Task, tools: Toolbox, calls: string[], timeoutMs: number) {
  const trace = await runEpisode(task, scriptedTeam(calls), tools, {
    toolTimeoutMs: timeoutMs,
    observationChars: MAX_CHARS,
  });
  const converted = convertTrace(trace, "all");
  if (!converted.ok) throw new Error(converted.detail);
  return observations(
    buildTrajectory(trace, converted.pieces, { tokenizer: bytes, profile: "all", id: "t" }),
  );
}

async function runtimeObservations(task: Task, tools: Toolbox, calls: string[], timeoutMs: number) {
  const turns = [...calls.map((call) => `<think>I call the tool.</think>\n${call}`), "<answer>x</answer>"];
  const trajectory = await runAgent({
    model: new ScriptedModel(turns),
    tools,
    profile: "all",
    question: task.question,
    toolTimeoutMs: timeoutMs,
    maxObservationChars: MAX_CHARS,
  });
  expect(trajectory.finishReason).toBe("answer");
  return observations(trajectory);
}

/** One kind of tool call: its toolbox (the world's real tools unless given), the calls the worker
 * and the model make, and what the last observation says. */
interface Case {
  what: string;
  tools?: () => Toolbox;
  calls: () => string[];
  timeoutMs?: number;
  shows: string;
}

const without = (tools: Toolbox, tag: ToolTag): Toolbox => new Map([...tools].filter(([t]) => t !== tag));

describe("the teacher's observations, distilled, are the runtime's", () => {
  let fx: WorldFixture;
  let task: Task;
  beforeAll(async () => {
    fx = await worldFixture("tiny");
    task = fx.world.splits.dev[0];
  });

  const search = (query: string) => `<web_search>${query}</web_search>`;
  const code = (program: string) => `<code>\`\`\`python\n${program}\n\`\`\`</code>`;

  it.each([
    { what: "a successful search", calls: () => [search(task.question)], shows: "1. " },
    { what: "a successful code run", calls: () => [code("print(6 * 7)")], shows: "42" },
    {
      what: "an unknown tool",
      tools: () => without(fx.tools, "crawl_page"),
      calls: () => ["<crawl_page>https://world.local/wiki/Home</crawl_page>"],
      shows: "No <crawl_page> tool is available in this run.",
    },
    {
      what: "bad arguments",
      calls: () => [code("")],
      shows: "Your <code> call could not be run: No Python program",
    },
    {
      what: "a tool that throws",
      tools: () => new Map([["web_search", brokenSearch(() => Promise.reject(new Error("index is gone")))]]),
      calls: () => [search("anything")],
      shows: "<web_search> failed: index is gone",
    },
    {
      what: "a tool that hangs past the timeout",
      tools: () => new Map([["web_search", brokenSearch(() => new Promise<never>(() => {}))]]),
      calls: () => [search("anything")],
      timeoutMs: 100,
      shows: "<web_search> timed out after 100 ms.",
    },
    {
      what: "a repeated call",
      calls: () => [search(task.question), search(task.question.toUpperCase())],
      shows: "(Repeated call: <web_search> already ran with these arguments",
    },
  ] satisfies Case[])("for $what", async (c: Case) => {
    const toolbox = c.tools?.() ?? fx.tools;
    const calls = c.calls();
    const timeoutMs = c.timeoutMs ?? 20_000;
    const distilled = await distilledObservations(task, toolbox, calls, timeoutMs);
    expect(distilled).toEqual(await runtimeObservations(task, toolbox, calls, timeoutMs));
    expect(distilled).toHaveLength(calls.length);
    expect(distilled.at(-1)).toContain(c.shows);
  });
});
