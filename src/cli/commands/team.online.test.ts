import { readFile } from "node:fs/promises";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { RoleTable, runImport } from "../../importers/index.js";
import { renderCall } from "../../importers/render.js";
import { ByteTokenizer } from "../../model/index.js";
import { type FixtureReply, type FixtureRequest, FixtureServer } from "../../model/testing/index.js";
import { loadTasks, type Task } from "../../tasks/index.js";
import { MasTrace } from "../../teacher/index.js";
import { worldFixture } from "../../teacher/testing.js";
import { parseFlags } from "../flags.js";
import { runTeamSummary, TeamFlags } from "./team.js";

type Message = { role: string; content?: unknown; tool_calls?: unknown[] };
type ToolDef = { type: string; function: { name: string; parameters?: { properties?: object } } };
type ChatBody = { model: string; messages: Message[]; tools?: ToolDef[] };

const text = (content: unknown): string =>
  typeof content === "string"
    ? content
    : Array.isArray(content)
      ? content.map((p) => (p as { text?: string }).text ?? "").join("")
      : "";

/**
 * A fake OpenAI-compatible chat model that plays the team from what each request holds, answering in
 * real `chat.completion` shapes: the manager (offered the agent tools) delegates the question to the
 * searcher, sends the gold answer to the verifier, then answers; the searcher (offered web_search)
 * searches the text it was given and reports the observation's first line; the verifier scores 5.
 */
function fakeTeamModel(gold: (question: string) => string, endless = false) {
  let calls = 0;
  const reply = (model: string, content: string | null, call?: { name: string; args: object }) => ({
    id: `chatcmpl-${++calls}`,
    object: "chat.completion",
    created: 1_700_000_000,
    model,
    choices: [
      {
        index: 0,
        message: {
          role: "assistant",
          content,
          ...(call
            ? {
                tool_calls: [
                  {
                    id: `call_${calls}`,
                    type: "function",
                    function: { name: call.name, arguments: JSON.stringify(call.args) },
                  },
                ],
              }
            : {}),
        },
        finish_reason: call ? "tool_calls" : "stop",
      },
    ],
    usage: { prompt_tokens: 100, completion_tokens: 10, total_tokens: 110 },
  });
  return (b: ChatBody): FixtureReply => {
    const tools = (b.tools ?? []).map((t) => t.function.name);
    const system = text(b.messages.find((m) => m.role === "system")?.content);
    const asked = text(b.messages.find((m) => m.role === "user")?.content);
    const results = b.messages.filter((m) => m.role === "tool").map((m) => text(m.content));
    if (tools.includes("searcher")) {
      // A manager that never settles: it asks the verifier again and again.
      if (endless)
        return { json: reply(b.model, null, { name: "verifier", args: { input: `Is it ${gold(asked)}?` } }) };
      if (results.length === 0)
        return { json: reply(b.model, "1. Find the fact.", { name: "searcher", args: { input: asked } }) };
      if (results.length === 1)
        return {
          json: reply(b.model, null, {
            name: "verifier",
            args: { input: `Proposed answer: ${gold(asked)}` },
          }),
        };
      return { json: reply(b.model, gold(asked)) };
    }
    if (tools.includes("web_search"))
      return results.length === 0
        ? { json: reply(b.model, null, { name: "web_search", args: { query: asked } }) }
        : { json: reply(b.model, `${results[0]!.split("\n")[0]} Source: the search.`) };
    if (system.startsWith("You are the verifier"))
      return { json: reply(b.model, "The answer matches the findings.\nSCORE: 5") };
    return { status: 400, json: { error: { message: `the fake has no part for: ${system.slice(0, 40)}` } } };
  };
}

async function fakeEndpoint(
  tasks: readonly Task[],
  opts: { failOn?: string; endless?: boolean } = {},
): Promise<FixtureServer> {
  const { failOn, endless } = opts;
  const gold = (question: string) => tasks.find((t) => t.question === question)?.answers[0] ?? "unknown";
  const model = fakeTeamModel(gold, endless);
  return FixtureServer.start({
    "GET /v1/models": () => ({ json: { object: "list", data: [{ id: "fake-chat", object: "model" }] } }),
    "POST /v1/chat/completions": (r: FixtureRequest) => {
      const body = r.body as ChatBody;
      // The failing endpoint: every request of the run on one task answers 500.
      if (failOn && body.messages.some((m) => m.role === "user" && text(m.content) === failOn))
        return { status: 500, json: { error: { message: "the server fell over" } } };
      return model(body);
    },
  });
}

const tok = new ByteTokenizer();

/** `coa team`'s flags on the world's first `limit` test tasks, written to `<dir>/team`. */
const teamFlags = (dir: string, limit: number, online: Record<string, string>) =>
  parseFlags(TeamFlags, {
    tasks: dir,
    split: "test",
    limit: String(limit),
    seed: "0",
    searchTool: "web_search",
    out: path.join(dir, "team"),
    ...online,
  });

/** `coa import --from openai-agents` of the run's spans; the MAS traces it wrote, and its report. */
async function importTeam(dir: string, tasks: readonly Task[]) {
  const out = path.join(dir, "imported");
  const input = path.join(dir, "team", "spans.jsonl");
  const roles = RoleTable.parse({});
  const report = await runImport({ input, from: "openai-agents", tasks, roles, tokenizer: tok, out });
  const traces = (await readFile(path.join(out, "traces.jsonl"), "utf8"))
    .trim()
    .split("\n")
    .map((l) => MasTrace.parse(JSON.parse(l)));
  return { report, traces };
}

describe("coa team --model: the reference team on an OpenAI-compatible endpoint", () => {
  it("runs the real tools, records what the framework sends, and its traces import and join their tasks", async () => {
    const { dir, tools } = await worldFixture("tiny", 4);
    const { tasks } = await loadTasks(dir, { split: "test", limit: 2 });
    expect(tasks).toHaveLength(2);
    const server = await fakeEndpoint(tasks);
    const logged: string[] = [];
    try {
      const flags = teamFlags(dir, 2, { model: `${server.url}/v1`, retries: "0" });
      const summary = await runTeamSummary(flags, (line) => logged.push(line));
      expect(summary).toMatchObject({ model: "fake-chat", tasks: 2, answered: 2, failed: [] });
      expect(JSON.parse(await readFile(path.join(dir, "team", "team.json"), "utf8"))).toEqual(summary);
    } finally {
      await server.close();
    }
    expect(logged.at(-1)).toContain("2 of 2 tasks answered, 0 failed");

    // What the framework sent: the model the server listed, each agent's instructions and its tools.
    const bodies = server.bodies("POST /v1/chat/completions") as ChatBody[];
    expect(bodies.every((b) => b.model === "fake-chat")).toBe(true);
    const toolsOf = (b: ChatBody) => (b.tools ?? []).map((t) => t.function.name).sort();
    const manager = bodies.filter((b) => toolsOf(b).includes("searcher"));
    const searcher = bodies.filter((b) => toolsOf(b).includes("web_search"));
    // Per task: the manager 3 calls (delegate, verify, answer), the searcher 2, the verifier 1.
    expect([manager.length, searcher.length, bodies.length]).toEqual([6, 4, 12]);
    expect(toolsOf(manager[0]!)).toEqual(["coder", "critic", "searcher", "verifier"]);
    expect(toolsOf(searcher[0]!)).toEqual(["crawl_page", "web_search"]);
    const schema = (b: ChatBody, name: string) =>
      b.tools!.find((t) => t.function.name === name)!.function.parameters?.properties;
    expect(Object.keys(schema(searcher[0]!, "web_search")!)).toEqual(["query"]);
    expect(Object.keys(schema(manager[0]!, "searcher")!)).toEqual(["input"]);
    expect(text(manager[0]!.messages[0]!.content)).toMatch(/^You lead a research team/);

    // The traces join their tasks, and each run ends with the answer the model gave.
    const { report, traces } = await importTeam(dir, tasks);
    expect(report.written).toBe(2);
    expect(traces.map((t) => t.taskId).sort()).toEqual(tasks.map((t) => t.id).sort());
    for (const trace of traces) {
      const task = tasks.find((t) => t.id === trace.taskId)!;
      expect(trace.unusable).toBeUndefined();
      expect(trace.finalAnswer).toBe(task.answers[0]);
      expect(trace.reward).toBe(1);
      // The searcher's call ran coa's real search: its observation is the search's own result.
      const search = tools.get("web_search")!;
      const real = await search.run(search.parseArgs(task.question), {
        timeoutMs: 15_000,
        maxChars: 1200,
        goal: task.question,
      });
      expect(real.ok).toBe(true);
      const i = trace.messages.findIndex((m) => m.kind === "tool_call" && m.tool?.name === "web_search");
      expect(trace.messages[i]!.content).toBe(task.question);
      expect(trace.messages[i + 1]).toMatchObject({ kind: "observation", content: real.text, ok: true });
      // …and it is what the model was then sent.
      const sentBack = searcher.flatMap((b) =>
        b.messages.filter((m) => m.role === "tool").map((m) => m.content),
      );
      expect(sentBack).toContain(real.text);
    }

    // Billed: every request as the server received it, its tool schemas included, no more, no less.
    const sent = bodies.map((b) => tok.encode(renderCall(b.messages, b.tools ?? [])).length);
    const withoutTools = bodies.map((b) => tok.encode(renderCall(b.messages, [])).length);
    const billed = traces.reduce((n, t) => n + t.stats.tokensIn, 0);
    expect(billed).toBe(sent.reduce((a, b) => a + b, 0));
    expect(billed).toBeGreaterThan(withoutTools.reduce((a, b) => a + b, 0));
  }, 60_000);

  it("a task whose requests fail (HTTP 500) is counted and the other task's trace is kept", async () => {
    const { dir } = await worldFixture("tiny", 5);
    const { tasks } = await loadTasks(dir, { split: "test", limit: 2 });
    const [broken, fine] = tasks as [Task, Task];
    const server = await fakeEndpoint(tasks, { failOn: broken.question });
    const logged: string[] = [];
    try {
      const flags = teamFlags(dir, 2, { model: server.url, modelName: "named-model", retries: "1" });
      const summary = await runTeamSummary(flags, (line) => logged.push(line));
      expect(summary).toMatchObject({ model: "named-model", tasks: 2, answered: 1 });
      expect(summary.failed).toHaveLength(1);
      expect(summary.failed[0]!.taskId).toBe(broken.id);
      expect(summary.failed[0]!.error).toMatch(/500/);
    } finally {
      await server.close();
    }
    expect(logged.join("\n")).toContain(`task ${broken.id} failed`);
    expect(logged.at(-1)).toContain("1 of 2 tasks answered, 1 failed");
    // --model-name: the server's list was not asked; the failing call was retried once (--retries 1).
    expect(server.requests.some((r) => r.path === "/v1/models")).toBe(false);
    const asked = (server.bodies("POST /v1/chat/completions") as ChatBody[]).filter(
      (b) => text(b.messages.find((m) => m.role === "user")?.content) === broken.question,
    );
    expect(asked).toHaveLength(2);

    const { traces } = await importTeam(dir, tasks);
    const kept = traces.find((t) => t.taskId === fine.id);
    expect(kept).toMatchObject({ finalAnswer: fine.answers[0], reward: 1 });
  }, 60_000);

  it("a run that reaches the SDK's turn limit is counted, not a crash", async () => {
    const { dir } = await worldFixture("tiny", 6);
    const { tasks } = await loadTasks(dir, { split: "test", limit: 1 });
    const server = await fakeEndpoint(tasks, { endless: true });
    try {
      const flags = teamFlags(dir, 1, { model: server.url });
      const summary = await runTeamSummary(flags, () => {});
      expect(summary).toMatchObject({ tasks: 1, answered: 0 });
      expect(summary.failed).toEqual([{ taskId: tasks[0]!.id, error: expect.stringMatching(/max turns/i) }]);
    } finally {
      await server.close();
    }
  }, 60_000);

  it("a bad endpoint is an error naming --model", async () => {
    const { dir } = await worldFixture("tiny", 6);
    const run = (model: string) => runTeamSummary(teamFlags(dir, 1, { model, retries: "0" }), () => {});
    await expect(run("ftp://example.org")).rejects.toThrow(/^--model: an http\(s\) base URL/);
    const gone = await FixtureServer.start({});
    await gone.close();
    await expect(run(gone.url)).rejects.toThrow(/^--model: .* did not list its models \(GET \/v1\/models\)/);
    const empty = await FixtureServer.start({
      "GET /v1/models": () => ({ json: { object: "list", data: [] } }),
    });
    try {
      await expect(run(empty.url)).rejects.toThrow(
        /^--model: .* lists no models; name one with --model-name/,
      );
    } finally {
      await empty.close();
    }
  }, 30_000);
});
