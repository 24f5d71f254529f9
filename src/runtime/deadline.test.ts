import { afterEach, describe, expect, it } from "vitest";
import { z } from "zod";
import { ByteTokenizer, OpenAICompatibleClient, unavailableModel } from "../model/index.js";
import { type FixtureHandler, FixtureServer } from "../model/testing/index.js";
import type { Tool } from "../tools/index.js";
import { runAgent } from "./agent.js";
import { RunTrajectory } from "./meta.js";
import type { RunOptions } from "./types.js";

// Issue 22, item 6: the episode's deadline bounds every model-server call (tokenize included, before
// the first completion and between turns), and an episode whose model fails is still recorded.

const bytes = new ByteTokenizer();
let fixture: FixtureServer | undefined;

afterEach(async () => {
  await fixture?.close();
  fixture = undefined;
});

const tokenized: FixtureHandler = (r) => ({
  json: { tokens: bytes.encode((r.body as { prompt: string }).prompt) },
});
const searchCall = "<think>Search.</think>\n<web_search>capital of Freedonia</web_search>";

const search: Tool<string> = {
  tag: "web_search",
  description: "fake search",
  argsSchema: z.string(),
  parseArgs: (raw) => raw.trim(),
  run: async () => ({ text: "Fredville", ok: true, truncated: false, elapsedMs: 0 }),
};

/** One episode against a loopback server, with coa's default client settings (120 s × 4 attempts). */
async function episode(routes: Record<string, FixtureHandler>, options: Partial<RunOptions> = {}) {
  fixture = await FixtureServer.start(routes);
  // Plain prompts: each test counts the /tokenize calls a plain prompt makes.
  const model = new OpenAICompatibleClient({
    baseUrl: `${fixture.url}/v1`,
    model: "m",
    retryBaseMs: 10,
    chatTemplate: "off",
  });
  const started = performance.now();
  const trajectory = await runAgent({
    model,
    tools: new Map([["web_search", search]]),
    profile: "web",
    question: "What is the capital of Freedonia?",
    ...options,
  });
  return { trajectory: RunTrajectory.parse(trajectory), ms: performance.now() - started, server: fixture };
}

describe("the episode deadline holds on every model call", () => {
  it("ends a hanging prompt /tokenize at --max-time and records max_time", async () => {
    const { trajectory, ms, server } = await episode(
      { "POST /tokenize": () => ({ hang: true }) },
      { budget: { maxTimeMs: 1_000 } },
    );
    expect(trajectory).toMatchObject({ finishReason: "max_time", answer: null, promptIds: [] });
    expect(ms).toBeGreaterThanOrEqual(950);
    expect(ms).toBeLessThan(1_600);
    expect(server.requests).toHaveLength(1);
  });

  it("ends a hanging observation /tokenize between turns", async () => {
    let tokenizeCalls = 0;
    const { trajectory, ms } = await episode(
      {
        // The prompt is tokenized; the observation's tokenization hangs.
        "POST /tokenize": (r) => (tokenizeCalls++ === 0 ? tokenized(r) : { hang: true }),
        "POST /v1/completions": () => ({
          json: {
            choices: [{ text: searchCall, token_ids: bytes.encode(searchCall), finish_reason: "stop" }],
          },
        }),
      },
      { budget: { maxTimeMs: 1_000 } },
    );
    expect(trajectory.finishReason).toBe("max_time");
    expect(trajectory.stats.toolCalls).toEqual({ web_search: 1 });
    expect(ms).toBeLessThan(1_600);
  });

  it("records a failing server as model_error with its error body clipped", async () => {
    const { trajectory, server } = await episode({
      "POST /tokenize": () => ({ status: 500, text: "E".repeat(50_000) }),
    });
    expect(trajectory.finishReason).toBe("model_error");
    const error = trajectory.meta.runtime.error ?? "";
    expect(error).toMatch(
      /^ModelHttpError: POST .*\/tokenize failed with HTTP 500: E+…\[clipped: 50000 chars/,
    );
    expect(error).toContain("(after 4 attempts)");
    expect(error.length).toBeLessThan(700);
    expect(server.requests).toHaveLength(4);
  });

  it("counts time the caller spent before the episode (startedAt)", async () => {
    const { trajectory, server } = await episode(
      { "POST /tokenize": tokenized },
      { budget: { maxTimeMs: 1_000 }, startedAt: performance.now() - 1_000 },
    );
    expect(trajectory.finishReason).toBe("max_time");
    expect(server.requests).toHaveLength(0);
  });

  it("still rejects on the caller's abort, even during the prompt's tokenization", async () => {
    const controller = new AbortController();
    setTimeout(() => controller.abort(new Error("user cancelled")), 100);
    await expect(
      episode({ "POST /tokenize": () => ({ hang: true }) }, { signal: controller.signal }),
    ).rejects.toThrow("user cancelled");
  });
});

describe("a model that could not be opened", () => {
  it("is recorded as model_error with the opening error", async () => {
    const model = unavailableModel("http://x/v1", new Error("GET http://x/v1/models: refused"));
    const trajectory = await runAgent({ model, tools: new Map(), profile: "web", question: "q" });
    expect(RunTrajectory.parse(trajectory)).toMatchObject({
      finishReason: "model_error",
      model: "http://x/v1",
      meta: { runtime: { error: "Error: GET http://x/v1/models: refused" } },
    });
  });
});
