import { mkdtemp } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterEach, beforeAll, describe, expect, it } from "vitest";
import { ByteTokenizer, OpenAICompatibleClient } from "../../model/index.js";
import { type FixtureReply, type FixtureRequest, FixtureServer } from "../../model/testing/index.js";
import type { Task } from "../../tasks/index.js";
import { runEpisode } from "../episode.js";
import { type WorldFixture, worldFixture } from "../testing.js";
import { MasTrace } from "../trace.js";
import { LlmDriver } from "./llm-driver.js";

const completion = (text: string): FixtureReply => ({
  json: {
    object: "text_completion",
    model: "fixture",
    choices: [{ index: 0, text, finish_reason: "stop" }],
    usage: { prompt_tokens: 1, completion_tokens: 1, total_tokens: 2 },
  },
});

/** Which agent a prompt is for: the context ends with "[role] <what is asked>". */
function roleOf(request: FixtureRequest): string {
  const prompt = (request.body as { prompt: string }).prompt;
  return /\[(\w+)\] [^\n]*\n$/.exec(prompt)?.[1] ?? "?";
}

/**
 * An OpenAI-compatible server that plays the team with prepared replies, one queue per role, and
 * injects faults by request number: a 500, then a request that never answers.
 */
function teamServer(replies: Record<string, string[]>, faults: Record<number, FixtureReply>) {
  let n = 0;
  const queues = Object.fromEntries(Object.entries(replies).map(([role, list]) => [role, [...list]]));
  return FixtureServer.start({
    "POST /v1/completions": (request) => {
      n++;
      if (faults[n]) return faults[n];
      const next = queues[roleOf(request)]?.shift();
      return next === undefined
        ? { status: 400, json: { error: { message: `no reply left for ${roleOf(request)}` } } }
        : completion(next);
    },
  });
}

function client(url: string): OpenAICompatibleClient {
  return new OpenAICompatibleClient({
    baseUrl: `${url}/v1`,
    model: "fixture",
    timeoutMs: 400,
    maxRetries: 3,
    retryBaseMs: 5,
    textOnly: true,
    tokenizer: new ByteTokenizer(),
    // A server that keeps stop strings (vLLM's extension), so a reply with an unclosed tool tag
    // stays malformed rather than being repaired by the client's dropped-stop inference.
    serverExtensions: true,
  });
}

describe("llm driver against an OpenAI-compatible server", () => {
  let fx: WorldFixture;
  let server: FixtureServer | undefined;
  beforeAll(async () => {
    fx = await worldFixture("tiny");
  });
  afterEach(async () => {
    await server?.close();
    server = undefined;
  });

  const task = (): Task => fx.world.splits.dev.find((x) => x.kind === "multihop")!;
  const subject = (t: Task) => (t.meta.plan as { steps: { subject: string }[] }).steps[0].subject;
  const replies = (t: Task) => ({
    manager: [
      `1. Look up ${subject(t)}.\n2. Follow the chain.`,
      "Let me think about where to start.",
      `SEARCH: Find the facts about ${subject(t)}.`,
      `ANSWER: ${t.answers[0]}`,
    ],
    searcher: [
      `Search for it.\n<web_search>${subject(t)}`,
      `Search again, with the tag closed.\n<web_search>${subject(t)}</web_search>`,
      `REPORT: Found the article on ${subject(t)}.`,
    ],
    critic: ["NO_ISSUES"],
    verifier: ["The chain holds.\nSCORE: 4"],
  });

  it("runs every role as a model call and survives 500s, a timeout and malformed tool syntax", async () => {
    const t = task();
    server = await teamServer(replies(t), {
      1: { status: 500, json: { error: { message: "boom" } } },
      4: { hang: true },
    });
    const cacheDir = await mkdtemp(path.join(tmpdir(), "coa-cache-"));
    const model = client(server.url);
    const trace = MasTrace.parse(await runEpisode(t, new LlmDriver({ model, cacheDir }), fx.tools));

    expect(trace.error).toBeNull();
    expect(trace.finalAnswer).toBe(t.answers[0]);
    expect(trace.reward).toBe(1);
    expect(trace.driver).toBe("llm");
    expect(trace.tokenizer).toBe("coa-byte-v1");
    expect(trace.stats.agentCalls).toBe(9);
    expect(server.requests.length).toBe(11);

    const kinds = trace.messages.map((m) => `${m.from}>${m.to}:${m.kind}`);
    expect(kinds).toEqual([
      "user>manager:task",
      "manager>manager:plan",
      "manager>manager:reasoning",
      "tool>manager:observation",
      "manager>searcher:delegate",
      "searcher>searcher:reasoning",
      "tool>searcher:observation",
      "searcher>searcher:reasoning",
      "searcher>tool:tool_call",
      "tool>searcher:observation",
      "searcher>manager:report",
      "critic>manager:reasoning",
      "manager>verifier:proposal",
      "verifier>manager:verdict",
      "manager>user:final",
    ]);
    expect(trace.messages[6].content).toBe("Format error: the <web_search> tag is never closed.");
    expect(trace.messages[9]).toMatchObject({ ok: true });
    expect(trace.messages[9].content).toContain(subject(t));
    expect(trace.messages[13].score).toBe(4);
    // Each call's tokens are counted on its own context: the manager re-reads more each time.
    const managerIn = trace.messages
      .filter((m) => m.from === "manager" && m.tokensIn > 0)
      .map((m) => m.tokensIn);
    expect(managerIn).toEqual([...managerIn].sort((a, b) => a - b));

    // A rerun is answered from the cache: no request reaches the server.
    const before = server.requests.length;
    const again = await runEpisode(t, new LlmDriver({ model, cacheDir }), fx.tools);
    expect(server.requests.length).toBe(before);
    expect(again.messages.map((m) => m.content)).toEqual(trace.messages.map((m) => m.content));
  });

  it("ends the episode with an error, not a crash, when the server stays down", async () => {
    server = await FixtureServer.start({
      "POST /v1/completions": () => ({ status: 503, json: { error: { message: "down" } } }),
    });
    const trace = await runEpisode(task(), new LlmDriver({ model: client(server.url) }), fx.tools);
    expect(trace.error).toMatch(/503/);
    expect(trace.reward).toBeNull();
    expect(trace.finalAnswer).toBeNull();
  });
});
