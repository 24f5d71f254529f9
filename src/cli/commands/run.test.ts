import { copyFile, mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { Command } from "commander";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ByteTokenizer } from "../../model/index.js";
import { engineChildren, type FixtureHandler, FixtureServer, inOrder } from "../../model/testing/index.js";
import { RunTrajectory } from "../../runtime/index.js";
import { register } from "./run.js";

const bytes = new ByteTokenizer();
const question = "Which river flows under the bridge designed by the engineer born in Osterby?";
const turns = [
  ["<think>Who is the engineer?</think>\n<web_search>engineer born in Osterby</web_search>", "</web_search>"],
  [
    "<plan>Read the bridge page.</plan>\n<crawl_page>https://example.org/wiki/tamsin-bridge</crawl_page>",
    "</crawl_page>",
  ],
  [
    "<suggested_answer>Sable River</suggested_answer>\n<double_check>Stated on the page. Score: 5</double_check>\n<answer>Sable River</answer>",
    "</answer>",
  ],
];

/** A vLLM-like server that serves the turns above in order, ids from the byte tokenizer. */
function replies() {
  return inOrder(
    ...turns.map(([text, stop]) => ({
      json: {
        model: "fixture-model",
        choices: [
          { index: 0, text, token_ids: bytes.encode(text!), finish_reason: "stop", stop_reason: stop },
        ],
      },
    })),
  );
}

let dir: string;
let corpus: string;
let server: FixtureServer;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "coa-run-"));
  corpus = join(dir, "corpus.jsonl");
  await copyFile(fileURLToPath(new URL("../../../examples/corpus.jsonl", import.meta.url)), corpus);
});
afterAll(async () => {
  await server?.close();
  await rm(dir, { recursive: true, force: true });
});

async function coaRun(args: string[]): Promise<string[]> {
  const lines: string[] = [];
  const write = process.stdout.write.bind(process.stdout);
  process.stdout.write = ((chunk: string) => {
    lines.push(
      ...String(chunk)
        .replace(/\x1b\[[0-9;]*m/g, "")
        .split("\n"),
    );
    return true;
  }) as typeof process.stdout.write;
  try {
    const program = new Command().exitOverride();
    register(program);
    await program.parseAsync(["node", "coa", "run", ...args]);
  } finally {
    process.stdout.write = write;
  }
  return lines;
}

describe("coa run", () => {
  it("runs on the embedded engine (launched before the agent loads) and stops it after", async () => {
    const out = join(dir, "engine", "trajectories.jsonl");
    const args = [
      question,
      "--model",
      "engine:micro",
      "--max-turns",
      "1",
      "--max-tokens-per-turn",
      "8",
      "--out",
      out,
    ];
    const lines = await coaRun(args);
    expect(lines).toContain("model coa-micro · profile web · tools web_search, crawl_page");
    const [record] = (await readFile(out, "utf8")).trim().split("\n");
    expect(RunTrajectory.parse(JSON.parse(record!)).model).toBe("coa-micro");
    expect(await engineChildren()).toEqual([]);
  });

  it("runs an episode against an HTTP server with the example corpus, prints steps, appends JSONL", async () => {
    server = await FixtureServer.start({
      "GET /v1/models": () => ({ json: { data: [{ id: "fixture-model" }] } }),
      // A base model: its /tokenize refuses chat messages (no template), so prompts stay plain text.
      "POST /tokenize": (r) =>
        "messages" in (r.body as object)
          ? { status: 400, json: { error: { message: "no chat template" } } }
          : { json: { tokens: bytes.encode((r.body as { prompt: string }).prompt) } },
      "POST /v1/completions": replies(),
    });
    const out = join(dir, "out", "trajectories.jsonl");
    const args = [question, "--model", `${server.url}/v1`, "--corpus", corpus, "--out", out, "--seed", "5"];
    const lines = await coaRun(args);

    expect(lines[0]).toBe(`indexed ${corpus}`);
    expect(lines).toContain("model fixture-model · profile web · tools web_search, crawl_page");
    expect(lines.find((l) => l.startsWith("web_search"))).toMatch(/^web_search\s+engineer born in Osterby$/);
    expect(lines.find((l) => l.startsWith("observation"))).toMatch(/^observation\s+\S/);
    expect(lines).toContain("answer            Sable River");
    expect(lines).toContain("final answer      Sable River");
    expect(lines.find((l) => l.startsWith("finish"))).toMatch(
      /^finish answer · 3 turns · tools web_search×1 crawl_page×1/,
    );

    const records = (await readFile(out, "utf8")).trim().split("\n");
    expect(records).toHaveLength(1);
    const traj = RunTrajectory.parse(JSON.parse(records[0]!));
    expect(traj).toMatchObject({ model: "fixture-model", answer: "Sable River", finishReason: "answer" });
    const sent = server.bodies("POST /v1/completions") as { prompt: number[]; seed: number }[];
    expect(sent.map((b) => b.seed)).toEqual([5, 6, 7]);
    expect(sent[2]!.prompt).toEqual([...traj.promptIds, ...traj.segments.slice(0, 4).flatMap((s) => s.ids)]);
  });

  it("rejects bad flags with the flag's name", async () => {
    await expect(coaRun(["q", "--model", "http://127.0.0.1:9", "--max-turns", "zero"])).rejects.toThrow(
      /^--max-turns: /,
    );
    await expect(coaRun(["q", "--model", "http://127.0.0.1:9", "--profile", "chess"])).rejects.toThrow(
      /^--profile: /,
    );
    await expect(coaRun(["q", "--model", "http://127.0.0.1:9", "--dialect", "klingon"])).rejects.toThrow(
      /^--dialect: /,
    );
    await expect(coaRun(["q", "--model", "http://127.0.0.1:9", "--chat-template", "maybe"])).rejects.toThrow(
      /^--chat-template: /,
    );
  });
});

describe("coa run under a hanging or failing server (issue 22, item 6)", () => {
  async function failingRun(routes: Record<string, FixtureHandler>, name: string, flags: string[]) {
    const fixture = await FixtureServer.start(routes);
    const out = join(dir, name, "trajectories.jsonl");
    const started = performance.now();
    try {
      const lines = await coaRun(["q", "--model", `${fixture.url}/v1`, "--out", out, ...flags]);
      const ms = performance.now() - started;
      const records = (await readFile(out, "utf8")).trim().split("\n");
      expect(records).toHaveLength(1);
      return {
        lines,
        ms,
        fixture,
        traj: RunTrajectory.parse(JSON.parse(records[0]!)),
        exitCode: process.exitCode,
      };
    } finally {
      process.exitCode = undefined;
      await fixture.close();
    }
  }

  it("ends a hanging GET /v1/models at --max-time and still appends a record", async () => {
    const { ms, traj, fixture } = await failingRun(
      { "GET /v1/models": () => ({ hang: true }) },
      "models-hang",
      ["--max-time", "1"],
    );
    expect(ms).toBeLessThan(2_000);
    expect(traj).toMatchObject({ finishReason: "max_time", answer: null, promptIds: [], segments: [] });
    expect(traj.model).toBe(`${fixture.url}/v1`);
    expect(traj.stats.wallMs).toBeGreaterThanOrEqual(990);
    expect(fixture.requests).toHaveLength(1);
  });

  it("ends a hanging /tokenize at --max-time", async () => {
    const { ms, traj, fixture } = await failingRun(
      {
        "GET /v1/models": () => ({ json: { data: [{ id: "fixture-model" }] } }),
        "POST /tokenize": () => ({ hang: true }),
      },
      "tokenize-hang",
      ["--max-time", "1"],
    );
    expect(ms).toBeLessThan(2_000);
    // It hangs at the first /tokenize: the one that asks what the server supports, as coa run opens it.
    expect(traj).toMatchObject({ finishReason: "max_time", model: `${fixture.url}/v1` });
  });

  it("records a failing GET /v1/models as model_error after --retries, its body clipped, exit code 1", async () => {
    const { traj, fixture, exitCode, lines } = await failingRun(
      { "GET /v1/models": () => ({ status: 502, text: "<html>".repeat(20_000) }) },
      "models-502",
      ["--retries", "1"],
    );
    expect(fixture.requests).toHaveLength(2);
    expect(exitCode).toBe(1);
    expect(traj.finishReason).toBe("model_error");
    const error = traj.meta.runtime.error ?? "";
    expect(error).toMatch(/HTTP 502: [<>html]{500}…\[clipped: 120000 chars in all\] \(after 2 attempts\)$/);
    expect(error.length).toBeLessThan(700);
    expect(lines.join("\n").length).toBeLessThan(2_000);
  });

  it("takes --request-timeout per attempt and --retries 0", async () => {
    const { ms, traj, fixture } = await failingRun(
      { "POST /tokenize": () => ({ hang: true }) },
      "request-timeout",
      ["--model-name", "m", "--request-timeout", "0.3", "--retries", "0", "--max-time", "30"],
    );
    expect(ms).toBeLessThan(1_500);
    expect(traj.finishReason).toBe("model_error");
    expect(traj.meta.runtime.error).toMatch(/\/tokenize: no answer within 300 ms$/);
    expect(fixture.requests).toHaveLength(1);
  });

  it("rejects a bad --retries or --request-timeout by name", async () => {
    await expect(coaRun(["q", "--model", "http://127.0.0.1:9", "--retries", "-1"])).rejects.toThrow(
      /^--retries: /,
    );
    await expect(coaRun(["q", "--model", "http://127.0.0.1:9", "--request-timeout", "0"])).rejects.toThrow(
      /^--request-timeout: /,
    );
  });
});
