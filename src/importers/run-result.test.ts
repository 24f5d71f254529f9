import { appendFile, mkdir, mkdtemp, readFile, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { type RunResult, setTraceProcessors, setTracingDisabled } from "@openai/agents";
import { describe, expect, it } from "vitest";
import { validateFile } from "../cli/commands/validate.js";
import { DistillConfig, runDistill } from "../distill/index.js";
import { ByteTokenizer } from "../model/index.js";
import type { Task } from "../tasks/index.js";
import { ExpertModelProvider } from "../teacher/agents-sdk/expert-model.js";
import { runReferenceTeam } from "../teacher/agents-sdk/team.js";
import { ExpertDriver } from "../teacher/expert/expert.js";
import { type WorldFixture, worldFixture } from "../teacher/testing.js";
import { MasTrace } from "../teacher/trace.js";
import { JsonlTraceProcessor, RoleTable, runImport } from "./index.js";
import { parsePartialJson, parseRunResult } from "./run-result.js";

const tok = new ByteTokenizer();
// biome-ignore lint/suspicious/noExplicitAny: a run result of any agent
type AnyResult = RunResult<unknown, any>;

/** One run of the reference team on `task` with the real SDK: every finished run, the manager's last. */
async function teamRun(fx: WorldFixture, task: Task): Promise<AnyResult[]> {
  const provider = new ExpertModelProvider(new ExpertDriver({ lapses: false }).episode(task), tok);
  const results: AnyResult[] = [];
  await runReferenceTeam(task, {
    provider,
    tools: fx.tools,
    toolOk: provider.toolOk,
    onResult: (r) => results.push(r),
  });
  return results;
}

const readTraces = async (dir: string) =>
  (await readFile(path.join(dir, "traces.jsonl"), "utf8"))
    .trim()
    .split("\n")
    .map((l) => MasTrace.parse(JSON.parse(l)));

const lines = (text: string) =>
  text
    .split("\n")
    .map((t, i) => ({ line: i + 1, text: t }))
    .filter((l) => l.text.trim());

// What every message kind of the team's work becomes.
const TEAM_KINDS = ["plan", "delegate", "tool_call", "observation", "report", "verdict", "final"];

const importInto = (input: string, tasks: Task[], out: string) =>
  runImport({ input, from: "openai-agents-run", tasks, roles: RoleTable.parse({}), tokenizer: tok, out });

describe("openai-agents-run: a real @openai/agents run's RunResult, imported and distilled", () => {
  it("imports run states and items as the traces import them, joins tasks, distils and validates", async () => {
    const fx = await worldFixture("tiny");
    const dir = await mkdtemp(path.join(tmpdir(), "coa-run-result-"));
    const tasks = fx.world.splits.test;
    const chosen = tasks.slice(0, 4);
    const states = path.join(dir, "states", "runs.jsonl");
    const spans = path.join(dir, "spans.jsonl");
    await mkdir(path.dirname(states), { recursive: true });
    const finals: AnyResult[] = [];
    for (const [i, task] of chosen.entries()) {
      // The first two runs are traced (the processor's file, and the state carries task_id); the
      // others are not, so their states join by question.
      setTracingDisabled(i >= 2);
      setTraceProcessors(i < 2 ? [new JsonlTraceProcessor(spans)] : []);
      const results = await teamRun(fx, task);
      // Each nested run (an agent used as a tool) and then the manager's, one state per line.
      for (const r of results) await appendFile(states, `${r.state.toString()}\n`);
      finals.push(results.at(-1)!);
      expect(results.at(-1)!.finalOutput).toBe(task.answers[0]);
      expect(results.length).toBeGreaterThan(3);
    }
    setTraceProcessors([]);
    setTracingDisabled(true);

    // The parse: one trace per manager run, its task id from the trace metadata when traced.
    const text = await readFile(states, "utf8");
    const parsed = parseRunResult(lines(text), states);
    expect(parsed.issues).toEqual([]);
    expect(parsed.traces.map((t) => t.trace.taskId)).toEqual([chosen[0].id, chosen[1].id, null, null]);

    const out = path.join(dir, "imported");
    const summary = await importInto(states, tasks, out);
    expect(summary).toMatchObject({ found: 4, written: 4, solved: 4, unusable: {}, guessedAgents: [] });
    expect(summary.issues).toEqual([]);
    const traces = await readTraces(out);
    expect(traces.map((t) => t.taskId)).toEqual(chosen.map((t) => t.id));
    for (const [i, t] of traces.entries()) {
      expect(t.reward, t.taskId).toBe(1);
      expect(t.finalAnswer).toBe(chosen[i].answers[0]);
      expect(t.messages.map((m) => m.kind)).toEqual(expect.arrayContaining(TEAM_KINDS));
      // The workers' own tool calls, from the nested runs, with the results the tools returned.
      for (const m of t.messages.filter((m) => m.kind === "tool_call")) {
        expect(m.from).toBe(m.tool!.name === "code" ? "coder" : "searcher");
        const obs = t.messages[m.index + 1]!;
        expect(obs.kind).toBe("observation");
        expect(text).toContain(JSON.stringify(obs.content).slice(1, -1));
      }
      // Costs are rebuilt from the items: the history grows call by call, so later calls share prefixes.
      expect(t.stats.tokensIn).toBeGreaterThan(t.stats.tokensOut);
      expect(t.stats.tokensCached).toBeGreaterThan(0);
    }

    // The same two runs through the trace processor: the same messages, in the same order. The
    // traces bill more: each call there also sends the agent's instructions and tool schemas.
    const fromSpans = path.join(dir, "imported-spans");
    const spanSummary = await runImport({
      input: spans,
      from: "openai-agents",
      tasks,
      roles: RoleTable.parse({}),
      tokenizer: tok,
      out: fromSpans,
    });
    expect(spanSummary.written).toBe(2);
    const exact = await readTraces(fromSpans);
    const talk = (t: MasTrace) =>
      t.messages.map(({ from, to, kind, content }) => ({ from, to, kind, content }));
    for (const [i, t] of exact.entries()) {
      expect(talk(traces[i]!)).toEqual(talk(t));
      expect(traces[i]!.stats.agentCalls).toBe(t.stats.agentCalls);
      expect(traces[i]!.stats.toolCalls).toBe(t.stats.toolCalls);
      expect(traces[i]!.stats.tokensIn).toBeLessThan(t.stats.tokensIn);
    }

    const data = path.join(dir, "data");
    const distilled = await runDistill({
      traces: out,
      out: data,
      formats: ["native"],
      config: DistillConfig.parse({}),
    });
    expect(distilled.drops).toEqual([]);
    expect(distilled.kept.length).toBe(4);
    for (const c of distilled.kept)
      expect(Object.values(c.stats.toolCalls).reduce((a, b) => a + b, 0)).toBeGreaterThan(0);
    expect((await validateFile(path.join(data, "native.jsonl"), undefined, () => {})).invalid).toBe(0);

    // One manager state alone (`result.state.toString()`): its agents-as-tools are delegations with
    // their reports, the workers' own tool calls are not in it.
    const one = path.join(dir, "one", "run.json");
    await mkdir(path.dirname(one), { recursive: true });
    await writeFile(one, finals[2]!.state.toString());
    const alone = await importInto(one, tasks, path.join(dir, "imported-one"));
    expect(alone).toMatchObject({ found: 1, written: 1, solved: 1, issues: [] });
    const [managerOnly] = await readTraces(path.join(dir, "imported-one"));
    expect(managerOnly!.messages.filter((m) => m.kind === "tool_call")).toEqual([]);
    expect(managerOnly!.messages.filter((m) => m.kind === "report").length).toBeGreaterThan(0);
    expect(managerOnly!.messages.map((m) => m.kind)).toEqual(expect.arrayContaining(["verdict", "final"]));

    // `result.newItems` names every agent but holds no user request: its trace joins no task.
    // `result.history` holds the request and the same items without agent names: it joins by
    // question, and reads as the manager-only state does, cost included.
    const items = path.join(dir, "items");
    await mkdir(items);
    await writeFile(path.join(items, "new-items.json"), JSON.stringify(finals[2]!.newItems));
    await writeFile(path.join(items, "history.json"), JSON.stringify(finals[2]!.history));
    const fromItems = await importInto(items, tasks, path.join(dir, "imported-items"));
    expect(fromItems).toMatchObject({ found: 2, written: 1, solved: 1 });
    expect(fromItems.issues.map((i) => `${path.basename(i.file)}:${i.reason}`)).toEqual([
      "new-items.json:no_task",
    ]);
    const [history] = await readTraces(path.join(dir, "imported-items"));
    expect(history!.taskId).toBe(chosen[2].id);
    expect(talk(history!)).toEqual(talk(managerOnly!));
    expect(history!.stats).toEqual(managerOnly!.stats);

    const newItems = parseRunResult(lines(await readFile(path.join(items, "new-items.json"), "utf8")), "x");
    expect(newItems.issues).toEqual([]);
    const steps = newItems.traces[0]!.trace.steps;
    expect(steps.at(-1)).toEqual({ type: "return", agent: "manager", output: chosen[2].answers[0] });
    expect(steps.flatMap((s) => (s.type === "delegate" ? [s.to] : []))).toEqual(
      managerOnly!.messages.filter((m) => m.kind === "delegate").map((m) => m.to),
    );
  }, 120_000);
});

describe("openai-agents-run: handoffs", () => {
  it("reads a handoff as a delegation and rebuilds each call's input from the items before it", () => {
    const item = (type: string, name: string, rawItem: object) => ({ type, rawItem, agent: { name } });
    const text = (t: string) => ({
      type: "message",
      role: "assistant",
      status: "completed",
      content: [{ type: "output_text", text: t }],
    });
    const handoff = { type: "function_call", callId: "h1", name: "transfer_to_Researcher", arguments: "{}" };
    const back = {
      type: "function_call_result",
      name: "transfer_to_Researcher",
      callId: "h1",
      output: { type: "text", text: '{"assistant":"Researcher"}' },
    };
    const items = [
      { role: "user", content: "Who founded Acme?" },
      item("message_output_item", "Triage", text("Passing this to research.")),
      item("handoff_call_item", "Triage", handoff),
      {
        type: "handoff_output_item",
        rawItem: back,
        sourceAgent: { name: "Triage" },
        targetAgent: { name: "Researcher" },
      },
      item("message_output_item", "Researcher", text("Ada Lovelace")),
    ];
    const { traces, issues } = parseRunResult([{ line: 1, text: JSON.stringify(items) }], "h.json");
    expect(issues).toEqual([]);
    const user = { role: "user", content: "Who founded Acme?" };
    expect(traces[0]!.trace).toMatchObject({ rootAgent: "Triage", taskId: null });
    expect(traces[0]!.trace.steps).toEqual([
      {
        type: "llm",
        agent: "Triage",
        input: [user],
        tools: [],
        output: "Passing this to research.",
        outputCalls: ["call transfer_to_Researcher({})"],
      },
      { type: "delegate", from: "Triage", to: "Researcher", input: null },
      {
        type: "llm",
        agent: "Researcher",
        input: [user, text("Passing this to research."), handoff, back],
        tools: [],
        output: "Ada Lovelace",
        outputCalls: [],
      },
      { type: "return", agent: "Triage", output: "Ada Lovelace" },
    ]);
  });
});

describe("openai-agents-run: bad input", () => {
  it("reads what a cut JSON text held before the cut, and nothing from other broken text", () => {
    expect(parsePartialJson('[1,2,{"a":').value).toEqual([1, 2]);
    expect(parsePartialJson('{"a":[1,{"b":2},{"c"').value).toEqual({ a: [1, { b: 2 }] });
    expect(parsePartialJson('{"a":"x","b":12').value).toEqual({ a: "x" });
    expect(parsePartialJson('{"a":"x\\"y').value).toEqual({});
    expect(parsePartialJson('{"a": tru')).toMatchObject({ value: {}, truncated: true });
    expect(parsePartialJson("[1,2] x")).toMatchObject({ value: undefined, truncated: false });
    expect(parsePartialJson("not json")).toMatchObject({ value: undefined, truncated: false });
    expect(parsePartialJson('{"a":[1]}')).toEqual({ value: { a: [1] }, error: null, truncated: false });
  });

  it("counts broken files, unknown items, outputs without a call and cut runs; imports the rest", async () => {
    const fx = await worldFixture("tiny");
    const tasks = fx.world.splits.test;
    const [t1, t2, t3] = [tasks[6]!, tasks[7]!, tasks[8]!];
    const dir = await mkdtemp(path.join(tmpdir(), "coa-run-result-bad-"));
    const agent = { name: "Researcher" };
    const msg = (text: string) => ({
      type: "message_output_item",
      rawItem: {
        type: "message",
        role: "assistant",
        status: "completed",
        content: [{ type: "output_text", text }],
      },
      agent,
    });
    const call = (id: string, query: string) => ({
      type: "tool_call_item",
      rawItem: {
        type: "function_call",
        callId: id,
        name: "search_docs",
        arguments: JSON.stringify({ query }),
      },
      agent,
    });
    const result = (id: string, output: string) => ({
      type: "tool_call_output_item",
      rawItem: { type: "function_call_result", name: "search_docs", callId: id, status: "completed", output },
      agent,
      output,
    });
    // A run state in the SDK's key order: the final step before the items, the trace metadata last.
    const state = (task: Task) => ({
      $schemaVersion: "1.22",
      currentTurn: 3,
      currentAgent: agent,
      originalInput: task.question,
      modelResponses: [],
      currentStep: { type: "next_step_final_output", output: task.answers[0] },
      generatedItems: [
        msg("I will search."),
        call("c1", task.question),
        result("c1", `An article about ${task.question}`),
        call("c2", `${task.question} again`),
        result("c2", `Another article: ${task.answers[0]}`),
        msg(task.answers[0]!),
      ],
      trace: {
        object: "trace",
        id: `trace_${task.id}`,
        workflow_name: "w",
        group_id: null,
        metadata: { task_id: task.id },
      },
    });
    await writeFile(path.join(dir, "a-garbage.json"), "this is not JSON\nat all\n");
    await writeFile(
      path.join(dir, "b-items.json"),
      JSON.stringify([
        { role: "user", content: t1.question },
        msg("I will search."),
        call("c1", t1.question),
        { type: "mystery_item", rawItem: {}, agent },
        result("c9", "an output whose call is in no item"),
        result("c1", `Found: ${t1.answers[0]}`),
        msg(t1.answers[0]!),
      ]),
    );
    // Pretty-printed and cut inside the second tool output: the items before it are read.
    const pretty = JSON.stringify(state(t2), null, 2);
    await writeFile(path.join(dir, "c-cut.json"), pretty.slice(0, pretty.indexOf("Another article") + 4));
    // Two runs appended one per line, the second torn.
    const line = JSON.stringify(state(t3));
    await writeFile(path.join(dir, "d-runs.jsonl"), `${line}\n${line.slice(0, line.indexOf('"c2"'))}\n`);

    const out = path.join(dir, "out");
    const summary = await importInto(dir, tasks, out);
    const issues = summary.issues.map((i) => `${path.basename(i.file)}:${i.line} ${i.reason} ${i.detail}`);
    const cutLines = pretty.slice(0, pretty.indexOf("Another article")).split("\n").length;
    expect(issues).toEqual([
      expect.stringMatching(/^a-garbage\.json:0 invalid_json not JSON/),
      'b-items.json:0 unknown_item_type file item 3: unknown item type "mystery_item", skipped',
      "b-items.json:0 tool_output_without_call file item 4: output for call c9 with no call before it, skipped",
      expect.stringMatching(new RegExp(`^c-cut\\.json:${cutLines} invalid_json the JSON ends early`)),
      "c-cut.json:0 unanswered_tool_call file item 3: call c2 to search_docs has no output (an interrupted run?)",
      expect.stringMatching(/^d-runs\.jsonl:2 invalid_json the JSON ends early/),
    ]);
    expect(summary).toMatchObject({ found: 4, written: 4, solved: 2 });
    const traces = await readTraces(out);
    expect(traces.map((t) => [t.taskId, t.reward, t.finalAnswer])).toEqual([
      [t1.id, 1, t1.answers[0]],
      // Cut: the task joins by question (the metadata was after the cut); no answer is trusted.
      [t2.id, null, null],
      [t3.id, 1, t3.answers[0]],
      [t3.id, null, null],
    ]);
    const [items, cut] = traces;
    expect(items!.messages.map((m) => [m.from, m.kind, m.content])).toEqual([
      ["user", "task", t1.question],
      ["manager", "plan", "I will search."],
      ["manager", "tool_call", t1.question],
      ["tool", "observation", `Found: ${t1.answers[0]}`],
      ["manager", "final", t1.answers[0]],
    ]);
    expect(cut!.messages.filter((m) => m.kind === "tool_call").map((m) => m.content)).toEqual([t2.question]);
  });
});
