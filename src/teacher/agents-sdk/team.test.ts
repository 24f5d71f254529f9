import { appendFile, mkdtemp, readFile, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { setTraceProcessors, setTracingDisabled } from "@openai/agents";
import { beforeAll, describe, expect, it } from "vitest";
import { validateFile } from "../../cli/commands/validate.js";
import { DistillConfig, runDistill } from "../../distill/index.js";
import { JsonlTraceProcessor, RoleTable, runImport } from "../../importers/index.js";
import { ByteTokenizer } from "../../model/index.js";
import type { Task } from "../../tasks/index.js";
import { ExpertDriver } from "../expert/expert.js";
import { type WorldFixture, worldFixture } from "../testing.js";
import { MasTrace } from "../trace.js";
import { ExpertModelProvider } from "./expert-model.js";
import { runReferenceTeam } from "./team.js";

const tok = new ByteTokenizer();

/** One run of the reference team on `task`, traced by the real SDK into the processor's file. */
async function teamRun(fx: WorldFixture, task: Task, traceContent = true): Promise<string | null> {
  const provider = new ExpertModelProvider(new ExpertDriver({ lapses: false }).episode(task), tok);
  return runReferenceTeam(task, { provider, tools: fx.tools, toolOk: provider.toolOk, traceContent });
}

/** An OTLP/JSON export of a one-agent GenAI trace (as the AI SDK or Mastra emit), with real tool output. */
async function otlpExport(fx: WorldFixture, task: Task, answer: string): Promise<string> {
  const query = task.question;
  const result = (
    await fx.tools.get("web_search")!.run(query, { timeoutMs: 5000, maxChars: 1200, goal: query })
  ).text;
  const attr = (key: string, v: string | number) => ({
    key,
    value: typeof v === "string" ? { stringValue: v } : { intValue: String(v) },
  });
  const t = (ms: number) => String(BigInt(1_700_000_000_000 + ms) * 1_000_000n);
  const span = (id: string, parent: string | undefined, name: string, at: number, attributes: object[]) => ({
    traceId: "0af7651916cd43dd8448eb211c80319c",
    spanId: id,
    ...(parent ? { parentSpanId: parent } : {}),
    name,
    startTimeUnixNano: t(at),
    endTimeUnixNano: t(at + 5),
    attributes,
  });
  const user = JSON.stringify([{ role: "user", parts: [{ type: "text", content: query }] }]);
  const call = { type: "tool_call", id: "c1", name: "search_docs", arguments: { query } };
  const spans = [
    // Written out of order on purpose: the importer orders by start time.
    span("b2", "a1", "execute_tool search_docs", 20, [
      attr("gen_ai.operation.name", "execute_tool"),
      attr("gen_ai.tool.name", "search_docs"),
      attr("gen_ai.tool.call.arguments", JSON.stringify({ query })),
      attr("gen_ai.tool.call.result", result),
    ]),
    span("a1", undefined, "invoke_agent assistant", 0, [
      attr("gen_ai.operation.name", "invoke_agent"),
      attr("gen_ai.agent.name", "assistant"),
      attr("coa.task.id", task.id),
    ]),
    span("c1", "a1", "chat gpt-x", 10, [
      attr("gen_ai.operation.name", "chat"),
      attr("gen_ai.request.model", "gpt-x"),
      attr("gen_ai.system_instructions", "Answer with the search tool."),
      attr("gen_ai.input.messages", user),
      attr(
        "gen_ai.output.messages",
        JSON.stringify([{ role: "assistant", parts: [{ type: "text", content: "I will search." }, call] }]),
      ),
      attr("gen_ai.usage.input_tokens", 40),
    ]),
    span("d3", "a1", "chat gpt-x", 30, [
      attr("gen_ai.operation.name", "chat"),
      attr(
        "gen_ai.input.messages",
        JSON.stringify([
          ...JSON.parse(user),
          { role: "assistant", parts: [call] },
          { role: "tool", parts: [{ type: "tool_call_response", id: "c1", response: result }] },
        ]),
      ),
      attr(
        "gen_ai.output.messages",
        JSON.stringify([{ role: "assistant", parts: [{ type: "text", content: answer }] }]),
      ),
    ]),
    span("e4", "zz", "rerank", 40, []),
  ];
  return JSON.stringify({ resourceSpans: [{ scopeSpans: [{ spans }] }] });
}

describe("the reference team on @openai/agents, imported and distilled", () => {
  let fx: WorldFixture;
  let dir: string;
  let tasks: Task[];
  beforeAll(async () => {
    fx = await worldFixture("tiny");
    dir = await mkdtemp(path.join(tmpdir(), "coa-agents-sdk-"));
    tasks = fx.world.splits.test;
  });

  it("runs on world tasks, imports with file:line issues, distils and validates", async () => {
    const spans = path.join(dir, "spans.jsonl");
    setTraceProcessors([new JsonlTraceProcessor(spans)]);
    setTracingDisabled(false); // the SDK turns tracing off under NODE_ENV=test
    const chosen = tasks.slice(0, 4);
    for (const task of chosen) expect(await teamRun(fx, task)).not.toBeNull();
    await teamRun(fx, tasks[4], false); // sensitive data off: kept for cost, dropped by distill
    setTraceProcessors([]);
    await appendFile(spans, '{"object":"trace.span","id":"x"\n{"hello":1}\n');

    const out = path.join(dir, "imported");
    const summary = await runImport({
      input: spans,
      from: "openai-agents",
      tasks,
      roles: RoleTable.parse({}),
      tokenizer: tok,
      out,
    });
    expect(summary.found).toBe(5);
    expect(summary.written).toBe(5);
    expect(summary.unusable).toEqual({ redacted: 1 });
    expect(summary.guessedAgents).toEqual([]);
    const bad = summary.issues.map((i) => `${i.reason}@${i.line}`);
    const lines = (await readFile(spans, "utf8")).trimEnd().split("\n").length;
    expect(bad).toEqual([`invalid_json@${lines - 1}`, `not_a_record@${lines}`]);

    const traces = (await readFile(path.join(out, "traces.jsonl"), "utf8"))
      .trim()
      .split("\n")
      .map((l) => MasTrace.parse(JSON.parse(l)));
    for (const t of traces.slice(0, 4)) {
      expect(t.reward, t.taskId).toBe(1);
      expect(t.messages.map((m) => m.kind)).toEqual(
        expect.arrayContaining([
          "plan",
          "delegate",
          "tool_call",
          "observation",
          "report",
          "verdict",
          "final",
        ]),
      );
      // Every call bills what the framework sent: instructions, tool schemas and the history.
      expect(t.stats.tokensIn).toBeGreaterThan(t.stats.tokensOut);
      expect(t.stats.tokensCached).toBeGreaterThan(0);
      expect(t.stats.tokensCached).toBeLessThan(t.stats.tokensIn);
    }

    const otel = path.join(dir, "otel.json");
    await writeFile(otel, await otlpExport(fx, tasks[5], tasks[5].answers[0]));
    const fromOtel = await runImport({
      input: otel,
      from: "otel",
      tasks,
      roles: RoleTable.parse({ agents: {}, tools: { search_docs: "web_search" } }),
      tokenizer: tok,
      out: path.join(dir, "imported-otel"),
    });
    expect(fromOtel.written).toBe(1);
    expect(fromOtel.issues.map((i) => i.reason)).toEqual(["missing_parent"]);

    const data = path.join(dir, "data");
    const distilled = await runDistill({
      traces: path.join(dir, "imported"),
      out: data,
      formats: ["native"],
      config: DistillConfig.parse({}),
    });
    const parse = distilled.stages[0];
    expect(parse.dropped).toEqual({ redacted: 1 });
    expect(distilled.kept.length).toBeGreaterThanOrEqual(3);
    const report: string[] = [];
    expect(
      (await validateFile(path.join(data, "native.jsonl"), undefined, (l) => report.push(l))).invalid,
    ).toBe(0);

    const otelData = path.join(dir, "data-otel");
    const one = await runDistill({
      traces: path.join(dir, "imported-otel"),
      out: otelData,
      formats: ["native"],
      // A one-agent team has no verifier: the double-check requirement is the user's to lift.
      config: DistillConfig.parse({ quality: { requireDoubleCheck: false } }),
    });
    expect(one.drops).toEqual([]);
    expect((await validateFile(path.join(otelData, "native.jsonl"), undefined, () => {})).invalid).toBe(0);
  }, 60_000);
});
