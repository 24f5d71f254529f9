import { mkdtemp, readFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { ModelClient } from "../model/index.js";
import type { RunOptions } from "../runtime/index.js";
import { type AgentConfig, AgentRunner } from "./agent.js";
import { type RunningServer, startServe } from "./server.js";
import { ServedTrajectory, TrajectoryStore } from "./trajectory-store.js";

export interface TestServe extends RunningServer {
  /** The trajectory log this server appends to. */
  log: string;
  /** Every record in the log; throws on a torn line, which must never happen. */
  logged(): Promise<ServedTrajectory[]>;
}

/** `coa serve` on a free loopback port, its log in a fresh temp dir, for tests and the bench. */
export async function startTestServe(
  model: ModelClient,
  opts: Partial<Omit<AgentConfig, "model" | "store">> & { apiKey?: string; maxBodyBytes?: number } = {},
): Promise<TestServe> {
  const log = join(await mkdtemp(join(tmpdir(), "coa-serve-")), "trajectories.jsonl");
  const agent = new AgentRunner({
    model,
    tools: opts.tools ?? (new Map() as RunOptions["tools"]),
    profile: opts.profile ?? "web",
    budget: opts.budget,
    sampling: opts.sampling,
    toolTimeoutMs: opts.toolTimeoutMs,
    concurrency: opts.concurrency ?? 4,
    store: await TrajectoryStore.open(log),
    prompt: opts.prompt,
  });
  const server = await startServe({ agent, apiKey: opts.apiKey, maxBodyBytes: opts.maxBodyBytes });
  return {
    ...server,
    log,
    logged: async () => {
      const text = await readFile(log, "utf8").catch(() => "");
      return text
        .split("\n")
        .filter(Boolean)
        .map((line) => ServedTrajectory.parse(JSON.parse(line)));
    },
  };
}
