import { request } from "node:http";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ROUTES, type RunningToolServer, startToolServer, type ToolBackend } from "./index.js";
import { post, worldConfig } from "./testing.js";

let server: RunningToolServer;
let url: string;
/** Set by a test to make the next searches hang until released. */
let hang: Promise<never> | null = null;

beforeAll(async () => {
  const cfg = await worldConfig({ timeoutMs: 300, maxBodyBytes: 4096 });
  // The real tools, except that search can be made to hang, as a stuck tool would.
  const backend: ToolBackend = { ...cfg.backend, search: (q, k) => hang ?? cfg.backend.search(q, k) };
  server = await startToolServer({ ...cfg, backend }, { host: "127.0.0.1", port: 0, routes: ROUTES });
  url = server.url;
});
afterAll(() => server.close());

/** GET /health with a Host header of our choosing, which fetch would not send. */
function statusWithHost(host: string): Promise<number | undefined> {
  return new Promise((resolve, reject) => {
    const req = request(
      { host: "127.0.0.1", port: server.port, path: "/health", headers: { host } },
      (res) => {
        res.resume();
        resolve(res.statusCode);
      },
    );
    req.on("error", reject);
    req.end();
  });
}

const expectError = (json: unknown, type: string) => {
  expect(json).toEqual({ error: { message: expect.any(String), type } });
};

describe("bad input gets an error body and the server keeps serving", () => {
  it("refuses malformed JSON with 400", async () => {
    for (const route of ["retrieve", "search", "crawl_page", "run_code", "score"]) {
      const { status, json } = await post(`${url}/${route}`, '{"queries": [');
      expect(status, route).toBe(400);
      expectError(json, "invalid_json");
    }
  });

  it("refuses wrong types and unknown fields, naming the field", async () => {
    const wrong = await post(`${url}/retrieve`, { queries: "one string", topk: 3 });
    expect(wrong.status).toBe(400);
    expectError(wrong.json, "invalid_request_error");
    expect(wrong.json.error.message).toMatch(/^queries:/);
    const unknown = await post(`${url}/search`, { q: "Arden", num: 3, page: 2 });
    expect(unknown.status).toBe(400);
    expect(unknown.json.error.message).toContain("page");
    const files = await post(`${url}/run_code`, { code: "print(1)", files: { "a.txt": "x" } });
    expect(files.json.error.message).toMatch(/files are not supported/);
    const both = await post(`${url}/score`, {
      data_source: "nq",
      ground_truth: "a",
      answer: "a",
      solution_str: "a",
    });
    expect(both.json.error.message).toMatch(/either answer or solution_str/);
    expect((await post(`${url}/retrieve`, [])).status).toBe(400);
  });

  it("refuses oversized bodies with 413, with or without a Content-Length", async () => {
    const big = JSON.stringify({ q: "x".repeat(10_000) });
    const sized = await post(`${url}/search`, big);
    expect(sized.status).toBe(413);
    expectError(sized.json, "request_too_large");
    const chunks = new ReadableStream({
      start(c) {
        c.enqueue(new TextEncoder().encode(big));
        c.close();
      },
    });
    const streamed = await fetch(`${url}/search`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: chunks,
      duplex: "half",
    } as RequestInit);
    expect(streamed.status).toBe(413);
  });

  it("answers a hanging tool with 504 and keeps serving", async () => {
    hang = new Promise<never>(() => {});
    const stuck = await post(`${url}/search`, { q: "Arden" });
    expect(stuck.status).toBe(504);
    expectError(stuck.json, "timeout");
    hang = null;
    const next = await post(`${url}/search`, { q: "Arden" });
    expect(next.status).toBe(200);
    expect(next.json.organic[0].title).toBe("Arden");
  });

  it("answers unknown routes and refused Host headers without serving them", async () => {
    const missing = await fetch(`${url}/v1/chat/completions`, { method: "POST", body: "{}" });
    expect(missing.status).toBe(404);
    expectError(await missing.json(), "not_found");
    expect(await statusWithHost("evil.example")).toBe(403);
    expect(await statusWithHost(`localhost:${server.port}`)).toBe(200);
    expect((await fetch(`${url}/health`)).status).toBe(200);
  });
});
