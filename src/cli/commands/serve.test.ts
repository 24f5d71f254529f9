import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { type AddressInfo, createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Command } from "commander";
import { describe, expect, it, vi } from "vitest";
import { ByteTokenizer, OpenAICompatibleClient } from "../../model/index.js";
import { startFakeServer } from "../../model/testing/index.js";
import { Trajectory } from "../../protocol/index.js";
import { parseFlags } from "../flags.js";
import { register, ServeFlags } from "./serve.js";
import { serveAgent } from "./serve-agent.js";

function program(): Command {
  const p = new Command().exitOverride();
  register(p);
  return p;
}

/** `coa serve`'s flags for the code profile over `model`, on any free loopback port, logging to `log`. */
function serveFlags(model: string, log: string, overrides: Record<string, string> = {}) {
  return parseFlags(ServeFlags, {
    model,
    profile: "code",
    search: "local",
    dialect: "coa",
    chatTemplate: "auto",
    host: "127.0.0.1",
    port: "0",
    concurrency: "1",
    log,
    unsafeNoSandbox: false,
    maxTurns: "2",
    ...overrides,
  });
}

describe("coa serve", () => {
  it("takes coa run's model and tool flags, and shows examples in --help", () => {
    const p = program();
    let help = "";
    p.commands[0]!.configureOutput({ writeOut: (s) => (help += s) });
    expect(() => p.parse(["node", "coa", "serve", "--help"])).toThrow("(outputHelp)");
    for (const flag of [
      "--model",
      "--corpus",
      "--profile",
      "--port",
      "--host",
      "--api-key",
      "--concurrency",
      "--log",
      "--dialect",
      "--system-prompt-file",
    ])
      expect(help).toContain(flag);
    expect(help).toContain("Examples:");
    expect(help).toContain("delta.coa_step");
  });

  it("closes the model it opened when serving fails after it (here the port is taken)", async () => {
    const dir = await mkdtemp(join(tmpdir(), "coa-serve-fails-"));
    const vllm = await startFakeServer("vllm", () => "<answer>4</answer>");
    const taken = createServer();
    await new Promise<void>((resolve) => taken.listen(0, "127.0.0.1", resolve));
    const close = vi.spyOn(OpenAICompatibleClient.prototype, "close");
    try {
      const flags = serveFlags(`${vllm.url}/v1`, join(dir, "trajectories.jsonl"), {
        port: String((taken.address() as AddressInfo).port),
      });
      await expect(serveAgent(flags, () => {})).rejects.toThrow(/EADDRINUSE/);
      expect(close).toHaveBeenCalledTimes(1);
    } finally {
      close.mockRestore();
      taken.close();
      await vllm.close();
      await rm(dir, { recursive: true, force: true });
    }
  });

  it("rejects bad flags with the flag's name before opening anything", async () => {
    await expect(
      program().parseAsync(["node", "coa", "serve", "--model", "engine", "--concurrency", "0"]),
    ).rejects.toThrow(/^--concurrency: /);
    await expect(
      program().parseAsync(["node", "coa", "serve", "--model", "engine", "--port", "http"]),
    ).rejects.toThrow(/^--port: /);
  });
});

describe("coa serve --dialect", () => {
  const bytes = new ByteTokenizer();
  // A model trained on AFM's code agent: it answers in \boxed{} and reads its prompt as one user turn.
  const afmCode = () => "<think>Six times seven.</think>\n<answer>The result is \\boxed{42}.</answer>";

  /** Serves the agent over a fake vLLM with the given flags, asks once, and returns the reply and record. */
  async function ask(flags: Record<string, string>) {
    const dir = await mkdtemp(join(tmpdir(), "coa-serve-dialect-"));
    const vllm = await startFakeServer("vllm", afmCode);
    const log = join(dir, "trajectories.jsonl");
    const parsed = serveFlags(`${vllm.url}/v1`, log, flags);
    const { server, model } = await serveAgent(parsed, () => {});
    try {
      const res = await fetch(`${server.url}/chat/completions`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ model: model.name, messages: [{ role: "user", content: "What is 6 * 7?" }] }),
      });
      expect(res.status).toBe(200);
      const reply = (await res.json()) as { choices: { message: { content: string } }[] };
      const record = Trajectory.parse(JSON.parse((await readFile(log, "utf8")).trim()));
      return { content: reply.choices[0]!.message.content, record };
    } finally {
      await server.close();
      await model.close?.();
      await vllm.close();
      await rm(dir, { recursive: true, force: true });
    }
  }

  it("speaks the chosen dialect: the boxed answer read, the supplied system prompt in one user turn", async () => {
    const dir = await mkdtemp(join(tmpdir(), "coa-serve-prompt-"));
    const file = join(dir, "afm-code.txt");
    await writeFile(file, "Solve it and box the answer.\n");
    try {
      const { content, record } = await ask({ dialect: "afm-code", systemPromptFile: file });
      expect(content).toBe("42");
      expect(record).toMatchObject({ dialect: "afm-code", finishReason: "answer", answer: "42" });
      expect(record.promptFormat).toEqual({ chatTemplate: true, customSystemPrompt: true });
      expect(bytes.decode(record.promptIds)).toContain(
        "<|im_start|>user\nSolve it and box the answer.\n\nQuestion: What is 6 * 7?<|im_end|>",
      );
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  it("without --dialect serves coa's rules: the same output's answer stays as written", async () => {
    const { content, record } = await ask({});
    expect(record.dialect ?? "coa").toBe("coa");
    expect(record.answer).toBe("The result is \\boxed{42}.");
    expect(content).toBe("The result is \\boxed{42}.");
  });

  it("rejects an unknown dialect by the flag's name", async () => {
    await expect(
      program().parseAsync(["node", "coa", "serve", "--model", "engine", "--dialect", "klingon"]),
    ).rejects.toThrow(/^--dialect: /);
  });
});
