import { spawn } from "node:child_process";
import { mkdtemp, rm } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";
import OpenAI from "openai";
import { expect, it } from "vitest";
import { readCheckpointManifest } from "../../model/index.js";
import { describeCheckpoint } from "./engine.js";

const repo = fileURLToPath(new URL("../../..", import.meta.url));

it("coa engine serve answers the openai client, and coa engine info describes its checkpoint", async () => {
  const cli = spawn(
    process.execPath,
    ["--import", "tsx", "src/cli/main.ts", "engine", "serve", "--preset", "micro", "--dtype", "fp32"],
    { cwd: repo, stdio: ["ignore", "pipe", "pipe"] },
  );
  const exited = new Promise<number | null>((resolve) => cli.on("exit", (code) => resolve(code)));
  const dir = await mkdtemp(path.join(os.tmpdir(), "coa-engine-cli-"));
  try {
    const baseURL = await new Promise<string>((resolve, reject) => {
      createInterface({ input: cli.stdout }).once("line", resolve);
      exited.then((code) => reject(new Error(`coa engine serve exited with ${code}`)));
    });
    expect(baseURL).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/v1$/);

    const openai = new OpenAI({ baseURL, apiKey: "unused", maxRetries: 0 });
    const res = await openai.completions.create({
      model: "coa-micro",
      prompt: "<think>",
      max_tokens: 6,
      seed: 1,
      stop: ["</think>"],
    });
    expect(res.model).toBe("coa-micro");
    expect(res.choices).toHaveLength(1);
    expect(["stop", "length"]).toContain(res.choices[0]!.finish_reason);
    expect(res.usage?.completion_tokens).toBeGreaterThan(0);

    const root = baseURL.replace(/\/v1$/, "");
    const info = (await (await fetch(`${root}/info`)).json()) as { pid: number; dtype: string };
    expect(info.dtype).toBe("fp32");
    const saved = await fetch(`${root}/checkpoint/save`, { method: "POST", body: JSON.stringify({ dir }) });
    expect(saved.status).toBe(200);
    const text = describeCheckpoint(dir, await readCheckpointManifest(dir));
    expect(text).toMatch(/model\s+micro — 0\.46M params; dim 128, 2 layers, 4 heads, context 1024/);
    expect(text).toMatch(/tokenizer\s+coa-byte-v1 \(22 tag tokens\)/);
    expect(text).toMatch(/step\s+0/);

    cli.kill("SIGINT");
    expect(await exited).toBe(0);
    expect(() => process.kill(info.pid, 0)).toThrow();
  } finally {
    cli.kill("SIGKILL");
    await rm(dir, { recursive: true, force: true });
  }
});
