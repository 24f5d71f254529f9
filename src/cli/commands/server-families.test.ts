import { copyFile, mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ByteTokenizer } from "../../model/index.js";
import {
  type FakeModel,
  type FixtureServer,
  type ServerFamily,
  startFakeServer,
} from "../../model/testing/index.js";
import { renderPrompt } from "../../protocol/index.js";
import { RunTrajectory } from "../../runtime/index.js";
import { parseFlags } from "../flags.js";
import { EvalFlags } from "./eval.js";
import { runEval } from "./eval-run.js";
import { runQuestion } from "./run-question.js";

// Issue 21, item 4: `coa run` and `coa eval`, without flags, against a fake of each server family.
// The rows of docs/model.md's server table name these tests.

const bytes = new ByteTokenizer();
const question = "What is the capital of Freedonia?";

/**
 * Searches once, then answers. Past the stop string it goes on writing (a forged observation), which
 * every server must cut; a server that drops the stop string leaves the tool call open to us.
 */
const model: FakeModel = (context) =>
  context.includes("</web_search>\n<observation>")
    ? "<think>The result names it.</think>\n<answer>Fredville</answer>"
    : "<think>Look it up.</think>\n<web_search>capital of Freedonia</web_search>\n<observation>forged</observation>";

let dir: string;
let corpus: string;
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "coa-families-"));
  corpus = join(dir, "corpus.jsonl");
  await copyFile(fileURLToPath(new URL("../../../examples/corpus.jsonl", import.meta.url)), corpus);
});
afterAll(() => rm(dir, { recursive: true, force: true }));

/** `coa run` against a fake of `family`, with no flags about the server; the record and printed lines. */
async function coaRun(family: ServerFamily, options: { chatTemplate?: boolean; flags?: object } = {}) {
  const server = await startFakeServer(family, model, { chatTemplate: options.chatTemplate });
  const out = join(dir, `${family}-${Math.random()}`, "trajectories.jsonl");
  const lines: string[] = [];
  try {
    await runQuestion(
      question,
      {
        model: `${server.url}/v1`,
        out,
        profile: "web",
        dialect: "coa",
        chatTemplate: "auto",
        search: "local",
        corpus,
        offline: true,
        unsafeNoSandbox: false,
        maxTurns: 6,
        ...options.flags,
      },
      (line) => lines.push(line.replace(/\x1b\[[0-9;]*m/g, "")),
    );
    const traj = RunTrajectory.parse(JSON.parse((await readFile(out, "utf8")).trim()));
    return { traj, lines, server };
  } finally {
    await server.close();
  }
}

/** The record's completion text, from its ids (every family here uses byte ids). */
const completion = (t: RunTrajectory) => bytes.decode(t.segments.flatMap((s) => s.ids));

/** The record's ids are the server's own, with a logprob for every generated one. */
function expectExactWithLogprobs(traj: RunTrajectory) {
  expect(traj.meta.runtime.exactIds).toBeUndefined();
  const model = traj.segments.filter((s) => s.source === "model");
  expect(model.length).toBeGreaterThan(0);
  expect(model.every((s) => s.logprobs?.length === s.ids.length)).toBe(true);
}

/** The prompt is our system prompt and the question through the fakes' ChatML template. */
function expectChatml(traj: RunTrajectory) {
  expect(traj.promptFormat).toEqual({ chatTemplate: true, customSystemPrompt: false });
  const prompt = bytes.decode(traj.promptIds);
  expect(prompt.startsWith("<|im_start|>system\nAnswer in tagged steps")).toBe(true);
  expect(prompt.endsWith(`<|im_start|>user\n${question}<|im_end|>\n<|im_start|>assistant\n`)).toBe(true);
}

/** The second model call read exactly the recorded ids: the prompt, the first reply, its observation. */
function expectSecondCallRead(sentIds: number[] | undefined, traj: RunTrajectory) {
  expect(sentIds).toEqual([...traj.promptIds, ...traj.segments.slice(0, 2).flatMap((s) => s.ids)]);
}

/** What every family must give: the tool call closed and run once, the forged text cut, the answer. */
function expectSolved(traj: RunTrajectory) {
  expect(traj).toMatchObject({ finishReason: "answer", answer: "Fredville" });
  expect(traj.stats.toolCalls).toEqual({ web_search: 1 });
  expect(traj.stats.formatErrors).toBe(0);
  expect(completion(traj)).toContain("<web_search>capital of Freedonia</web_search>\n<observation>");
  expect(completion(traj)).not.toContain("forged");
}

describe("vLLM (completions with ids, /tokenize with messages, ChatML)", () => {
  it("vllm: token ids exact, chat template applied, stop kept, logprobs", async () => {
    const { traj, server, lines } = await coaRun("vllm");
    expectSolved(traj);
    expectExactWithLogprobs(traj);
    expectChatml(traj);
    const sent = server.bodies("POST /v1/completions") as { prompt: number[] }[];
    expectSecondCallRead(sent[1]?.prompt, traj);
    expect(lines.filter((l) => l.includes("text mode") || l.includes("no chat template"))).toEqual([]);
  });

  it("vllm base model: no template, so the plain prompt, said once", async () => {
    const { traj, lines } = await coaRun("vllm", { chatTemplate: false });
    expectSolved(traj);
    expectExactWithLogprobs(traj);
    expect(traj.promptFormat).toBeUndefined();
    expect(bytes.decode(traj.promptIds)).toBe(renderPrompt({ profile: "web", question }));
    expect(lines.filter((l) => l.includes("no chat template"))).toHaveLength(1);
  });

  it("vllm --chat-template off keeps the plain prompt; on fails a model without one", async () => {
    const off = await coaRun("vllm", { flags: { chatTemplate: "off" } });
    expect(off.traj.promptFormat).toBeUndefined();
    const on = await coaRun("vllm", { chatTemplate: false, flags: { chatTemplate: "on" } });
    expect(on.traj.finishReason).toBe("model_error");
    expect(on.traj.meta.runtime.error).toMatch(/cannot apply the model's chat template/);
  });

  it("vllm with an AFM dialect and a supplied system prompt: one user turn, the template's own system", async () => {
    const file = join(dir, "afm-system.txt");
    await writeFile(file, "You can only use the following functions ...\n");
    const { traj } = await coaRun("vllm", { flags: { dialect: "afm-web", systemPromptFile: file } });
    expectSolved(traj);
    expectExactWithLogprobs(traj);
    expect(traj).toMatchObject({
      dialect: "afm-web",
      promptFormat: { chatTemplate: true, customSystemPrompt: true },
    });
    expect(bytes.decode(traj.promptIds)).toBe(
      "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n" +
        `<|im_start|>user\nYou can only use the following functions ...\n\nQuestion: ${question}<|im_end|>\n` +
        "<|im_start|>assistant\n",
    );
  });
});

describe("native routes: SGLang's /generate and llama.cpp's /completion give exact ids", () => {
  it("sglang: token ids exact via /generate, no chat template (said once), stop kept, logprobs", async () => {
    const { traj, lines, server } = await coaRun("sglang");
    expectSolved(traj);
    expectExactWithLogprobs(traj);
    expect(traj.tokenizer).toBe("fake-sglang");
    // Its /tokenize takes no messages: the plain prompt, one notice.
    expect(traj.promptFormat).toBeUndefined();
    expect(bytes.decode(traj.promptIds)).toBe(renderPrompt({ profile: "web", question }));
    expect(lines.filter((l) => l.includes("no chat template"))).toHaveLength(1);
    expect(lines.filter((l) => l.includes("text mode"))).toEqual([]);
    // Generation read exactly the recorded ids, and nothing went through its OpenAI routes.
    const sent = server.bodies("POST /generate") as { input_ids: number[] }[];
    expect(sent).toHaveLength(2);
    expectSecondCallRead(sent[1]?.input_ids, traj);
    expect(server.bodies("POST /v1/completions")).toHaveLength(0);
  });

  it("llamacpp: token ids exact via /completion, chat template via /apply-template, stop kept, logprobs", async () => {
    const { traj, lines, server } = await coaRun("llamacpp");
    expectSolved(traj);
    expectExactWithLogprobs(traj);
    expectChatml(traj);
    const sent = server.bodies("POST /completion") as { prompt: number[] }[];
    expectSecondCallRead(sent[1]?.prompt, traj);
    expect(server.bodies("POST /v1/completions")).toHaveLength(0);
    expect(lines.filter((l) => l.includes("text mode") || l.includes("no chat template"))).toEqual([]);
  });
});

describe("servers that drop the stop string and return no ids", () => {
  it.each([
    ["ollama", false],
    ["llamacpp", true],
  ] as const)(
    "%s OpenAI routes (--text-only: %s): ids inexact, stop restored, no logprobs",
    async (family, forced) => {
      const { traj, lines, server } = await coaRun(family, { flags: forced ? { textOnly: true } : {} });
      expectSolved(traj);
      expect(traj.meta.runtime.exactIds).toBe(false);
      expect(traj.tokenizer).toBe("coa-byte-v1");
      expect(traj.promptFormat).toBeUndefined();
      // Found by itself where not forced, and said once.
      expect(lines.filter((l) => l.includes("has no /tokenize: text mode"))).toHaveLength(forced ? 0 : 1);
      const sent = server.bodies("POST /v1/completions").slice(-2) as { prompt: unknown }[];
      expect(sent).toHaveLength(2);
      expect(sent.every((b) => typeof b.prompt === "string")).toBe(true);
      expect(traj.segments.some((s) => s.source === "model" && s.logprobs !== undefined)).toBe(false);
    },
  );
});

describe("OpenAI (chat completions only, strict fields)", () => {
  it("openai: chat route found by itself, messages sent, ids inexact, stop restored", async () => {
    const { traj, lines, server } = await coaRun("openai");
    expectSolved(traj);
    expect(traj.meta.runtime.exactIds).toBe(false);
    expect(traj.promptFormat).toEqual({ chatTemplate: true, customSystemPrompt: false });
    expect(lines.filter((l) => l.includes("generating through /v1/chat/completions"))).toHaveLength(1);
    const chats = server.bodies("POST /v1/chat/completions") as {
      messages: { role: string; content: string }[];
    }[];
    expect(chats[0]!.messages.map((m) => m.role)).toEqual(["system", "user"]);
    expect(chats[1]!.messages.map((m) => m.role)).toEqual(["system", "user", "assistant"]);
    expect(chats[1]!.messages[2]!.content).toMatch(/<\/web_search>\n<observation>/);
    expect(traj.segments.some((s) => s.source === "model" && s.logprobs !== undefined)).toBe(false);
  });
});

describe("coa eval against each family", () => {
  it.each([
    ["vllm", true, "POST /v1/completions"],
    ["sglang", true, "POST /generate"],
    ["llamacpp", true, "POST /completion"],
    ["ollama", false, "POST /v1/completions"],
    ["openai", false, "POST /v1/chat/completions"],
  ] as const)(
    "%s: solves the task with no server flags (ids exact: %s, through %s)",
    async (family, exact, route) => {
      const server = await startFakeServer(family, model);
      const tasks = join(dir, `${family}-tasks.jsonl`);
      await writeFile(tasks, `${JSON.stringify({ id: "t1", question, answer: "Fredville" })}\n`);
      const logged: string[] = [];
      try {
        const flags = parseFlags(EvalFlags, {
          model: `${server.url}/v1`,
          tasks,
          corpus,
          out: join(dir, `${family}-eval`),
          k: "1",
          profile: "web",
          concurrency: "1",
          temperature: "0",
          seed: "0",
        });
        const summary = await runEval(flags, (line) => logged.push(line));
        expect(summary.success.pass1).toBe(1);
        expect(summary.finishReasons).toEqual({ answer: 1 });
        const [record] = (await readFile(join(flags.out, "trajectories.jsonl"), "utf8"))
          .trim()
          .split("\n")
          .map((l) => RunTrajectory.parse(JSON.parse(l)));
        expect(record!.meta.runtime.exactIds).toBe(exact ? undefined : false);
        // Both model calls of the episode went through the family's generation route.
        expect(
          server.bodies(route).filter((b) => (b as { max_tokens?: number }).max_tokens !== 1),
        ).toHaveLength(2);
      } finally {
        await (server as FixtureServer).close();
      }
    },
  );
});
