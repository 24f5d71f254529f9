import { setTimeout as sleep } from "node:timers/promises";
import { describe, expect, it } from "vitest";
import { z } from "zod";
import { ByteTokenizer, type ModelClient } from "../model/index.js";
import { ScriptedModel } from "../model/testing/index.js";
import {
  checkFormat,
  completionIds,
  lossMask,
  type ProfileName,
  renderObservation,
  renderPrompt,
  type ToolTag,
  Trajectory,
} from "../protocol/index.js";
import { type Observation, type Tool, ToolArgsError } from "../tools/index.js";
import { runAgent } from "./agent.js";
import { RunTrajectory } from "./meta.js";
import { trajectoryText } from "./text.js";
import type { RunEvent, RunOptions } from "./types.js";

const bytes = new ByteTokenizer();

/** A tool whose result is computed from its (trimmed) argument text; counts its runs. */
function fakeTool(tag: ToolTag, result: (args: string, signal?: AbortSignal) => string | Promise<string>) {
  const tool: Tool<string> & { runs: number } = {
    tag,
    description: `fake ${tag}`,
    argsSchema: z.string(),
    runs: 0,
    parseArgs(raw) {
      const args = raw.trim();
      if (args.startsWith("!")) throw new ToolArgsError("a query cannot start with '!'");
      return args;
    },
    async run(args, ctx): Promise<Observation> {
      tool.runs++;
      const text = await result(args, ctx.signal);
      return { text, ok: true, truncated: false, elapsedMs: 0 };
    },
  };
  return tool;
}

const search = () => fakeTool("web_search", (q) => `1. Freedonia — capital Fredville (query: ${q})`);
const crawl = () => fakeTool("crawl_page", (url) => `Page ${url}: Fredville is the capital.`);

function run(
  script: string[],
  options: Omit<Partial<RunOptions>, "tools"> & { tools?: Tool<string>[] } = {},
) {
  const model = new ScriptedModel(script);
  const events: RunEvent[] = [];
  const tools = new Map((options.tools ?? [search(), crawl()]).map((t) => [t.tag, t]));
  const done = runAgent({
    profile: "web",
    question: "What is the capital of Freedonia?",
    ...options,
    model,
    tools,
    onEvent: (e) => events.push(e),
  });
  return { model, events, done };
}

/** Every record must satisfy these, whatever happened in the episode. */
function expectTokenExact(traj: Trajectory, model: ScriptedModel) {
  // Written as v2 with its runtime meta typed: it reads back, through JSON, as it was.
  expect(traj.version).toBe(2);
  expect(RunTrajectory.parse(JSON.parse(JSON.stringify(traj)))).toEqual(JSON.parse(JSON.stringify(traj)));
  const ids = completionIds(traj);
  const mask = lossMask(traj);
  const modelPositions = traj.segments.flatMap((s) => s.ids.map(() => s.source === "model"));
  expect(mask).toEqual(modelPositions.map((m) => (m ? 1 : 0)));
  expect(mask.filter((m) => m === 1)).toHaveLength(traj.stats.modelTokens);
  expect(ids.length - traj.stats.modelTokens).toBe(traj.stats.toolTokens);
  for (const s of traj.segments) if (s.source === "model") expect(s.logprobs).toHaveLength(s.ids.length);
  // Each call read the prompt plus everything recorded before its own segment, and nothing else.
  const modelAt = traj.segments.flatMap((s, k) => (s.source === "model" ? [k] : []));
  let reads = 0;
  for (const [i, request] of model.requests.entries()) {
    const before = traj.segments.slice(0, modelAt[i]).flatMap((s) => s.ids);
    expect(request.promptIds, `call ${i + 1}`).toEqual([...traj.promptIds, ...before]);
    reads += request.promptIds!.length;
  }
  expect(traj.stats.contextTokens).toBe(reads);
  expect(traj.stats.modelCalls).toBe(model.requests.length);
  expect(bytes.decode(traj.promptIds)).toBe(renderPrompt({ profile: traj.profile, question: traj.question }));
}

describe("runAgent: a full web episode", () => {
  const script = [
    "<think>I need the capital.</think>\n<plan>Search, then read the page.</plan>\n<web_search>capital of Freedonia</web_search>",
    "<reflection>The snippet points to a page.</reflection>\n<crawl_page>https://ex.org/freedonia</crawl_page>",
    "<suggested_answer>Fredville</suggested_answer>\n<double_check>The page says so. Score: 5</double_check>\n<answer>Fredville</answer>",
  ];

  it("uses every web tag and tool and records a token-exact trajectory", async () => {
    const { model, events, done } = run(script, { taskId: "t1", sampling: { seed: 7 } });
    const traj = await done;
    expect(model.requests.map((r) => [r.seed, r.temperature, r.topP, r.logprobs])).toEqual([
      [7, 1, 1, true],
      [8, 1, 1, true],
      [9, 1, 1, true],
    ]);
    expect(traj).toMatchObject({ answer: "Fredville", finishReason: "answer", taskId: "t1", origin: "run" });
    expect(traj.stats).toMatchObject({
      turns: 3,
      modelCalls: 3,
      toolCalls: { web_search: 1, crawl_page: 1 },
      duplicateCalls: 0,
      formatErrors: 0,
    });
    expect(traj.segments.map((s) => s.source)).toEqual(["model", "tool", "model", "tool", "model"]);
    expectTokenExact(traj, model);

    const { completion } = trajectoryText(traj, bytes);
    expect(completion).toBe(
      script[0] +
        renderObservation("1. Freedonia — capital Fredville (query: capital of Freedonia)") +
        script[1] +
        renderObservation("Page https://ex.org/freedonia: Fredville is the capital.") +
        script[2],
    );
    // The record reads as a valid, finished trajectory to the protocol's own checker.
    expect(checkFormat(completion, "web").errors).toEqual([]);

    const stepTypes = events.flatMap((e) => (e.type === "step" ? [e.step.type] : []));
    expect(stepTypes).toEqual([
      "think",
      "plan",
      "tool_call",
      "observation",
      "reflection",
      "tool_call",
      "observation",
      "suggested_answer",
      "double_check",
      "answer",
    ]);
    expect(
      events.filter((e) => e.type === "tool_start").map((e) => e.type === "tool_start" && e.tool),
    ).toEqual(["web_search", "crawl_page"]);
    expect(events.at(-1)).toMatchObject({ type: "finish", finishReason: "answer", answer: "Fredville" });
    const calls = traj.meta.runtime.calls;
    expect(calls.map((c) => c.action)).toEqual(["tool", "tool", "answer"]);
    expect(traj.stats.wallMs).toBeGreaterThanOrEqual(traj.stats.modelMs + traj.stats.toolMs - 1);
  });

  it("gives steps spans into the completion text", async () => {
    const { events, done } = run(script);
    const { completion } = trajectoryText(await done, bytes);
    for (const e of events) {
      if (e.type !== "step") continue;
      const { start, end } = e.step.span!;
      expect(completion.slice(start, end)).toMatch(/^<(\w+)>[\s\S]*<\/\1>$/);
    }
  });
});

describe("runAgent: the other tools and profiles", () => {
  it.each<[ProfileName, ToolTag, string]>([
    ["mhqa", "wiki_search", "<wiki_search>Freedonia capital</wiki_search>"],
    ["code", "code", "<code>```python\nprint(6 * 7)\n```</code>"],
    ["all", "crawl_page", "<crawl_page>https://ex.org/a | https://ex.org/b</crawl_page>"],
  ])("%s profile runs %s", async (profile, tag, call) => {
    const tool = fakeTool(tag, (args) => `ran: ${args.length} chars`);
    const { model, done } = run(
      [`<think>Use ${tag}.</think>\n${call}`, "<think>Done.</think>\n<answer>42</answer>"],
      {
        profile,
        tools: [tool],
      },
    );
    const traj = await done;
    expect(traj).toMatchObject({ finishReason: "answer", answer: "42", profile });
    expect(tool.runs).toBe(1);
    expect(model.requests[0]!.stop).toContain(`</${tag}>`);
    expect(checkFormat(trajectoryText(traj, bytes).completion, profile).errors).toEqual([]);
    expectTokenExact(traj, model);
  });
});

describe("runAgent: budgets", () => {
  const searching = (n: number) =>
    Array.from({ length: n }, (_, i) => `<think>Try ${i}.</think>\n<web_search>query ${i}</web_search>`);

  it("stops after maxTurns model calls; limits given as undefined keep their defaults", async () => {
    const { model, done } = run(searching(5), { budget: { maxTurns: 2, maxTimeMs: undefined } });
    const traj = await done;
    expect(traj).toMatchObject({ finishReason: "max_turns", answer: null });
    expect(traj.stats.turns).toBe(2);
    expect(traj.stats.formatErrors).toBe(0); // every turn stopped: nothing was cut
    expectTokenExact(traj, model);
  });

  it("stops when the context reaches maxTokens, asking for no more than fits", async () => {
    const prompt = bytes.encode(renderPrompt({ profile: "web", question: "q" })).length;
    const { model, done } = run([`<think>${"x".repeat(500)}`], {
      question: "q",
      budget: { maxTokens: prompt + 40 },
    });
    const traj = await done;
    expect(traj.finishReason).toBe("max_tokens");
    expect(model.requests[0]!.maxTokens).toBe(40);
    expect(traj.promptIds.length + completionIds(traj).length).toBe(prompt + 40);
  });

  it("treats the model's context length as a token budget, so a full context ends as max_tokens, not a refused request", async () => {
    const prompt = bytes.encode(renderPrompt({ profile: "web", question: "q" })).length;
    const model = Object.assign(new ScriptedModel([`<think>${"x".repeat(500)}`]), {
      contextLength: prompt + 30,
    });
    const traj = await runAgent({ model, tools: new Map(), profile: "web", question: "q" });
    expect(traj.finishReason).toBe("max_tokens");
    expect(model.requests[0]!.maxTokens).toBe(30);
  });

  it("continues a call that stopped for length, then parses the joined turn", async () => {
    const answer = "<think>Known.</think>\n<answer>Fredville</answer>";
    const prompt = renderPrompt({ profile: "web", question: "q" });
    // Like a real model, the script continues whatever text it is given.
    const model = new ScriptedModel(({ prompt: seen }) => answer.slice(seen.length - prompt.length));
    const traj = await runAgent({
      model,
      tools: new Map(),
      profile: "web",
      question: "q",
      sampling: { maxTokensPerTurn: 12 },
    });
    expect(traj).toMatchObject({ finishReason: "answer", answer: "Fredville" });
    expect(traj.meta.runtime.calls.map((c) => c.finishReason)).toEqual(["length", "stop"]);
    expect(model.requests[1]!.promptIds).toHaveLength(traj.promptIds.length + 12);
    expect(trajectoryText(traj, bytes).completion).toBe(answer);
    expect(traj.segments.every((s) => s.source === "model")).toBe(true);
  });

  it("counts a turn cut by maxTokens as a truncated_turn, with the cut text's own errors", async () => {
    const prompt = bytes.encode(renderPrompt({ profile: "web", question: "q" })).length;
    const { model, events, done } = run([`<think>${"the ".repeat(500)}`], {
      question: "q",
      budget: { maxTokens: prompt + 40 },
    });
    const traj = await done;
    expect(traj).toMatchObject({ finishReason: "max_tokens", answer: null });
    const cut = { start: 0, end: trajectoryText(traj, bytes).completion.length };
    expect(traj.meta.runtime.formatErrors).toEqual([
      { kind: "truncated_turn", message: expect.stringContaining("max_tokens"), span: cut },
      { kind: "unclosed_tag", message: expect.any(String), span: cut },
    ]);
    expect(traj.stats.formatErrors).toBe(2);
    const reported = events.filter((e) => e.type === "format_error");
    expect(reported).toMatchObject([{ turn: 1, total: 2 }]);
    expectTokenExact(traj, model);
  });

  it("counts a turn still being continued when maxTurns ends the episode, spanning only that turn", async () => {
    const search = "<think>Search.</think>\n<web_search>Freedonia</web_search>";
    const loop = "the ".repeat(20);
    const { model, done } = run([search, loop, loop], {
      budget: { maxTurns: 3 },
      sampling: { maxTokensPerTurn: 64 },
    });
    const traj = await done;
    expect(traj.finishReason).toBe("max_turns");
    const calls = traj.meta.runtime.calls;
    expect(calls.map((c) => [c.finishReason, c.action])).toEqual([
      ["stop", "tool"],
      ["length", "continue"],
      ["length", "continue"],
    ]);
    const completion = trajectoryText(traj, bytes).completion;
    const cutAt = completion.indexOf("the ");
    const errors = traj.meta.runtime.formatErrors;
    expect(errors.map((e) => e.kind)).toEqual(["truncated_turn", "stray_text"]);
    expect(errors[0]!.span).toEqual({ start: cutAt, end: completion.length });
    expect(completion.slice(cutAt)).toBe("the ".repeat(32)); // two calls of 64 tokens
    expectTokenExact(traj, model);
  });

  it("stops at maxTimeMs while the model is generating", async () => {
    const model = new ScriptedModel(["<answer>late</answer>"], { latencyMs: 10_000 });
    const traj = await runAgent({
      model,
      tools: new Map(),
      profile: "web",
      question: "q",
      budget: { maxTimeMs: 50 },
    });
    expect(traj).toMatchObject({ finishReason: "max_time", answer: null });
    expect(traj.stats.wallMs).toBeLessThan(5_000);
  });

  it("stops at maxTimeMs during a slow tool, which gets a timeout observation", async () => {
    const slow = fakeTool("web_search", () => sleep(10_000).then(() => "never"));
    const { done } = run(searching(3), { tools: [slow], budget: { maxTimeMs: 100 } });
    const traj = await done;
    expect(traj.finishReason).toBe("max_time");
    expect(trajectoryText(traj, bytes).completion).toContain("<web_search> timed out after");
  });

  it("falls back to the last suggested answer when a budget runs out", async () => {
    const { done } = run(
      [
        "<think>Guess first.</think>\n<suggested_answer>Fredville</suggested_answer>\n<double_check>Fairly sure. Score: 4</double_check>\n<web_search>confirm</web_search>",
        ...searching(3),
      ],
      { budget: { maxTurns: 2 } },
    );
    const traj = await done;
    expect(traj).toMatchObject({ finishReason: "fallback_suggested_answer", answer: "Fredville" });
    expect(traj.meta.runtime.budgetExhausted).toBe("max_turns");
  });
});

describe("runAgent: duplicate guard and answer promotion", () => {
  it("answers a repeated call from memory with a note, without running the tool again", async () => {
    const tool = search();
    const { events, done } = run(
      [
        "<think>Search.</think>\n<web_search>Capital of  Freedonia</web_search>",
        "<think>Again.</think>\n<web_search>capital of freedonia</web_search>",
        "<think>Enough.</think>\n<answer>Fredville</answer>",
      ],
      { tools: [tool] },
    );
    const traj = await done;
    expect(tool.runs).toBe(1);
    expect(traj.stats).toMatchObject({ duplicateCalls: 1, toolCalls: { web_search: 2 } });
    const ends = events.filter((e) => e.type === "tool_end");
    expect(ends.map((e) => e.type === "tool_end" && e.duplicate)).toEqual([false, true]);
    const second = ends[1]!.type === "tool_end" ? ends[1]!.observation.text : "";
    expect(second).toMatch(/^\(Repeated call: <web_search> already ran/);
    expect(second).toContain("1. Freedonia — capital Fredville");
  });

  it("promotes a second suggested answer to the answer", async () => {
    const { done } = run([
      "<think>Guess.</think>\n<suggested_answer>Oldtown</suggested_answer>\n<double_check>Doubtful. Score: 2</double_check>\n<plan>Search.</plan>\n<web_search>Freedonia capital</web_search>",
      "<suggested_answer>Fredville</suggested_answer>\n<double_check>Matches. Score: 4</double_check>\n<web_search>more</web_search>",
    ]);
    const traj = await done;
    expect(traj).toMatchObject({ finishReason: "promoted_suggested_answer", answer: "Fredville" });
    expect(traj.stats.toolCalls).toEqual({ web_search: 1 });
  });
});

describe("runAgent: format errors", () => {
  it("feeds errors back as an observation, does not act on the turn, and lets the model recover", async () => {
    const tool = search();
    const { model, events, done } = run(
      [
        "Let me look. <web_search>Freedonia</web_search>",
        "<think>Oops.</think>\n<observation>I know it</observation>\n<web_search>Freedonia</web_search>",
        "<think>Fine.</think>",
        "<think>Properly now.</think>\n<web_search>Freedonia</web_search>",
        "<think>Got it.</think>\n<answer>Fredville</answer>",
      ],
      { tools: [tool], budget: { maxFormatErrors: 10 } },
    );
    const traj = await done;
    expect(traj).toMatchObject({ finishReason: "answer", answer: "Fredville" });
    expect(tool.runs).toBe(1);
    const kinds = traj.meta.runtime.formatErrors.map((e) => e.kind);
    expect(kinds).toEqual([
      "stray_text", // text before the tool call
      "bad_transition", // a tool call cannot start a trajectory
      "model_wrote_observation",
      "bad_transition", // an observation must follow a tool call
      "bad_transition", // stopped without acting
    ]);
    expect(traj.stats.formatErrors).toBe(5);
    expect(events.filter((e) => e.type === "format_error")).toHaveLength(3);
    const completion = trajectoryText(traj, bytes).completion;
    expect(completion).toContain("<observation>Format error in your last output:\n- text outside any tag");
    expect(completion).toContain("you stopped without calling a tool or writing <answer>");
    expectTokenExact(traj, model);
  });

  it("ends the episode once more than maxFormatErrors errors were seen", async () => {
    const { done } = run(["junk <web_search>a</web_search>", "more junk", "still junk", "junk"], {
      budget: { maxFormatErrors: 2 },
    });
    const traj = await done;
    expect(traj).toMatchObject({ finishReason: "format_errors", answer: null });
    expect(traj.stats.formatErrors).toBe(3);
  });

  it("rejects a tool the profile does not enable", async () => {
    const { done } = run(
      ["<think>Code it.</think>\n<code>```python\nprint(1)\n```</code>\n<web_search>x</web_search>"],
      {
        budget: { maxFormatErrors: 0 },
      },
    );
    const traj = await done;
    expect(traj.finishReason).toBe("format_errors");
    expect(traj.meta.runtime.formatErrors.map((e) => e.kind)).toContain("disabled_tag");
  });
});

describe("runAgent: tool and model failures", () => {
  const twoTurns = (call: string) => [
    `<think>Go.</think>\n${call}`,
    "<think>Done.</think>\n<answer>x</answer>",
  ];

  it.each([
    [
      "a throwing tool",
      fakeTool("web_search", () => Promise.reject(new Error("index is gone"))),
      {},
      "<web_search> failed: index is gone",
    ],
    [
      "a hanging tool",
      fakeTool("web_search", () => new Promise<string>(() => {})),
      { toolTimeoutMs: 50 },
      "<web_search> timed out after 50 ms.",
    ],
    [
      "an oversized result",
      fakeTool("web_search", () => "y".repeat(500)),
      { maxObservationChars: 100 },
      "…[truncated 423 chars]",
    ],
  ] as const)("turns %s into an observation", async (_, tool, options, expected) => {
    const { done } = run(twoTurns("<web_search>q</web_search>"), { tools: [tool], ...options });
    const traj = await done;
    expect(traj.finishReason).toBe("answer");
    expect(trajectoryText(traj, bytes).completion).toContain(expected);
  });

  it("tells the model about bad arguments and unavailable tools", async () => {
    const { done } = run(
      [
        "<think>Go.</think>\n<web_search>!important</web_search>",
        "<think>Read.</think>\n<crawl_page>https://ex.org</crawl_page>",
        "<think>Done.</think>\n<answer>x</answer>",
      ],
      { tools: [search()] },
    );
    const completion = trajectoryText(await done, bytes).completion;
    expect(completion).toContain(
      "<observation>Your <web_search> call could not be run: a query cannot start with '!'</observation>",
    );
    expect(completion).toContain("<observation>No <crawl_page> tool is available in this run.</observation>");
  });

  it("ends with model_error and the message when the model fails", async () => {
    const { done } = run(["<think>Search.</think>\n<web_search>q</web_search>"]);
    const traj = await done;
    expect(traj).toMatchObject({ finishReason: "model_error", answer: null });
    expect(traj.meta.runtime.error).toBe("Error: ScriptedModel: no continuation left (the script has 1)");
    expect(traj.stats.toolCalls).toEqual({ web_search: 1 });
  });

  it("rejects when the caller aborts", async () => {
    const controller = new AbortController();
    const model = new ScriptedModel(["<answer>x</answer>"], { latencyMs: 10_000 });
    const done = runAgent({
      model,
      tools: new Map(),
      profile: "web",
      question: "q",
      signal: controller.signal,
    });
    setTimeout(() => controller.abort(new Error("stop now")), 20);
    await expect(done).rejects.toThrow("stop now");
  });
});

describe("runAgent: hostile replies", () => {
  /** A ScriptedModel behind a server that ignores max_tokens: every reply comes back whole. */
  function ignoringMaxTokens(script: string[]) {
    const model = new ScriptedModel(script);
    const client: ModelClient = {
      name: model.name,
      tokenizer: model.tokenizer,
      complete: (req, o) => model.complete({ ...req, maxTokens: 1_000_000 }, o),
      tokenize: (text) => model.tokenize(text),
      detokenize: (ids) => model.detokenize(ids),
    };
    return { model, client };
  }

  it("records a 300k-token reply without overflowing the stack", async () => {
    const long = `<think>${"a".repeat(300_000)}</think>\n<answer>Fredville</answer>`;
    const { model, done } = run([long], {
      budget: { maxTokens: 400_000 },
      sampling: { maxTokensPerTurn: 400_000 },
    });
    const traj = await done;
    expect(traj).toMatchObject({ finishReason: "answer", answer: "Fredville" });
    expect(traj.stats.modelTokens).toBe(bytes.encode(long).length);
    expectTokenExact(traj, model);
  });

  it("cuts a reply longer than asked to the budget, token-exact with aligned logprobs", async () => {
    const prompt = bytes.encode(
      renderPrompt({ profile: "web", question: "What is the capital of Freedonia?" }),
    );
    const budget = prompt.length + 16_384;
    const reply = `<think>${"b".repeat(65_536)}</think>`;
    const { model, client } = ignoringMaxTokens([reply]);
    const traj = await runAgent({
      profile: "web",
      question: "What is the capital of Freedonia?",
      model: client,
      tools: new Map(),
      budget: { maxTokens: budget },
      sampling: { maxTokensPerTurn: 100_000 },
    });
    expect(traj.finishReason).toBe("max_tokens");
    expect(traj.segments).toHaveLength(1);
    const segment = traj.segments[0]!;
    expect(segment.source).toBe("model");
    expect(segment.ids).toEqual(bytes.encode(reply).slice(0, 16_384));
    expect("logprobs" in segment && segment.logprobs).toHaveLength(16_384);
    expect(traj.stats.modelTokens).toBe(16_384);
    expect(traj.meta.runtime.calls).toEqual([
      expect.objectContaining({
        modelTokens: 16_384,
        finishReason: "length",
        cutTokens: bytes.encode(reply).length - 16_384,
      }),
    ]);
    expect(traj.stats.formatErrors).toBeGreaterThan(0); // the cut turn counts as truncated
    expect(model.requests).toHaveLength(1);
    expect(Trajectory.parse(traj)).toBeTruthy();
  });

  it("records the episode when the runtime itself throws", async () => {
    const model = new ScriptedModel(["<think>x</think>\n<answer>Fredville</answer>"]);
    const traj = await runAgent({
      profile: "web",
      question: "q",
      model,
      tools: new Map(),
      onEvent: (e) => {
        if (e.type === "step") throw new RangeError("boom");
      },
    });
    expect(traj).toMatchObject({
      finishReason: "model_error",
      answer: null,
      meta: { runtime: { error: "RangeError: boom" } },
    });
    expect(traj.segments).toHaveLength(1);
    expect(Trajectory.parse(traj)).toBeTruthy();
  });
});
