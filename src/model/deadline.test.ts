import { afterEach, describe, expect, it } from "vitest";
import { clipServerText, ModelConnectionError, ModelHttpError, ModelResponseError } from "./errors.js";
import { openModel } from "./open.js";
import { OpenAICompatibleClient, type OpenAICompatibleOptions } from "./openai-client.js";
import { type FixtureHandler, FixtureServer } from "./testing/index.js";

// Issue 22, item 6: a caller's deadline bounds every model-server call, whatever the per-attempt
// timeout and retries; retries are counted as configured; server error bodies are clipped.

let fixture: FixtureServer | undefined;

afterEach(async () => {
  await fixture?.close();
  fixture = undefined;
});

async function serve(routes: Record<string, FixtureHandler>) {
  fixture = await FixtureServer.start(routes);
  return fixture;
}

/** Defaults as coa uses them: 120 s per attempt, 3 retries; only a deadline can end a hang early. */
function client(url: string, options: Partial<OpenAICompatibleOptions> = {}) {
  return new OpenAICompatibleClient({
    baseUrl: `${url}/v1`,
    model: "m",
    timeoutMs: 120_000,
    maxRetries: 3,
    retryBaseMs: 10,
    ...options,
  });
}

/** How long `promise` took to settle, and with what rejection. */
async function timed(promise: Promise<unknown>): Promise<{ ms: number; error: unknown }> {
  const started = performance.now();
  const error = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  return { ms: performance.now() - started, error };
}

const hang = (): FixtureHandler => () => ({ hang: true });

describe("a deadline signal bounds hanging model calls", () => {
  it("ends a hanging /tokenize at the deadline, not after 4 × 120 s", async () => {
    const server = await serve({ "POST /tokenize": hang() });
    const { ms, error } = await timed(
      client(server.url).tokenize("x", { signal: AbortSignal.timeout(1_000) }),
    );
    expect(error).toMatchObject({ name: "TimeoutError" });
    expect(ms).toBeGreaterThanOrEqual(950);
    expect(ms).toBeLessThan(1_600);
    expect(server.requests).toHaveLength(1);
  });

  it("ends a hanging GET /v1/models at the deadline, through openModel too", async () => {
    const server = await serve({ "GET /v1/models": hang() });
    const listed = await timed(client(server.url).listModels({ signal: AbortSignal.timeout(1_000) }));
    expect(listed.error).toMatchObject({ name: "TimeoutError" });
    expect(listed.ms).toBeLessThan(1_600);
    const opened = await timed(openModel(`${server.url}/v1`, { signal: AbortSignal.timeout(1_000) }));
    expect(opened.error).toMatchObject({ name: "TimeoutError" });
    expect(opened.ms).toBeLessThan(1_600);
  });

  it("ends a hanging /detokenize and chat completion at the deadline", async () => {
    const server = await serve({ "POST /detokenize": hang(), "POST /v1/chat/completions": hang() });
    const detok = await timed(client(server.url).detokenize([1, 2], { signal: AbortSignal.timeout(1_000) }));
    expect(detok.ms).toBeLessThan(1_600);
    const chat = await timed(
      client(server.url, { api: "chat" }).complete(
        { prompt: "x", maxTokens: 4 },
        { signal: AbortSignal.timeout(1_000) },
      ),
    );
    expect(chat.error).toMatchObject({ name: "TimeoutError" });
    expect(chat.ms).toBeLessThan(1_600);
  });

  it("ends the backoff wait between retries at the deadline, with the deadline's reason", async () => {
    const server = await serve({ "POST /tokenize": () => ({ status: 503, text: "busy" }) });
    const { ms, error } = await timed(
      client(server.url, { retryBaseMs: 60_000 }).tokenize("x", { signal: AbortSignal.timeout(1_000) }),
    );
    expect(error).toMatchObject({ name: "TimeoutError" });
    expect(ms).toBeLessThan(1_600);
    expect(server.requests).toHaveLength(1);
  });

  it("ends a request still queued behind hanging ones at its deadline", async () => {
    const server = await serve({ "POST /tokenize": hang() });
    const c = client(server.url, { concurrency: 1 });
    const blocker = c.tokenize("first", { signal: AbortSignal.timeout(5_000) });
    blocker.catch(() => {});
    const { ms, error } = await timed(c.tokenize("second", { signal: AbortSignal.timeout(1_000) }));
    expect(error).toMatchObject({ name: "TimeoutError" });
    expect(ms).toBeLessThan(1_600);
    expect(server.requests).toHaveLength(1); // the second never reached the server
  });
});

describe("per-attempt timeout and retries", () => {
  it("makes exactly 1 + maxRetries attempts on a failing server", async () => {
    for (const maxRetries of [0, 2]) {
      const server = await serve({ "GET /v1/models": () => ({ status: 500, text: "down" }) });
      const { error } = await timed(client(server.url, { maxRetries }).listModels());
      expect(error).toBeInstanceOf(ModelHttpError);
      expect(error).toMatchObject({ attempts: maxRetries + 1 });
      expect(server.requests).toHaveLength(maxRetries + 1);
      await server.close();
      fixture = undefined;
    }
  });

  it("takes openModel's timeoutMs and maxRetries (the --request-timeout and --retries flags)", async () => {
    const server = await serve({ "GET /v1/models": hang() });
    const { ms, error } = await timed(openModel(`${server.url}/v1`, { timeoutMs: 200, maxRetries: 1 }));
    expect(error).toBeInstanceOf(ModelConnectionError);
    expect(error).toMatchObject({ timedOut: true, attempts: 2 });
    expect((error as Error).message).toContain("no answer within 200 ms (after 2 attempts)");
    expect(server.requests).toHaveLength(2);
    expect(ms).toBeLessThan(1_500);
  });
});

describe("server error bodies are clipped", () => {
  const huge = "x".repeat(100_000);

  it("clips a plain-text body, a JSON message and a malformed 2xx body, noting the length", async () => {
    const server = await serve({
      "POST /tokenize": () => ({ status: 400, text: huge }),
      "POST /detokenize": () => ({ status: 400, json: { error: { message: huge } } }),
      "GET /v1/models": () => ({ text: `{${huge}` }),
    });
    const c = client(server.url);
    for (const call of [() => c.tokenize("x"), () => c.detokenize([1]), () => c.listModels()]) {
      const { error } = await timed(call());
      expect(error instanceof ModelHttpError || error instanceof ModelResponseError).toBe(true);
      const { message } = error as Error;
      expect(message.length).toBeLessThan(700);
      expect(message).toMatch(/…\[clipped: 10000[01] chars in all\]/);
    }
  });

  it("leaves short texts alone", () => {
    expect(clipServerText("overloaded")).toBe("overloaded");
    expect(clipServerText("abcdef", 3)).toBe("abc…[clipped: 6 chars in all]");
  });
});
