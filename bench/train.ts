// Training on the embedded engine (tiny preset, fresh weights): SFT step throughput over synthetic
// native trajectories, and RL steps (rollouts through the runtime, then the policy update).

import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Engine } from "../src/model/index.js";
import { ScriptedModel } from "../src/model/testing/index.js";
import { scoreTask } from "../src/rewards/index.js";
import { runAgent } from "../src/runtime/index.js";
import { agentEpisodes, RlConfig, runRl, runSft } from "../src/train/index.js";

const QUESTION = "Which letter comes first in the alphabet?";

export async function run(): Promise<void> {
  const dir = await mkdtemp(join(tmpdir(), "coa-bench-train-"));
  const engine = await Engine.start({ preset: "tiny" }, { onLog: () => {} });
  try {
    const lines: string[] = [];
    for (let i = 0; i < 32; i++) {
      const think = "reason about the letters one by one ".repeat(2 + (i % 8));
      const model = new ScriptedModel([`<think>${think}</think>\n<answer>a</answer>`]);
      lines.push(
        JSON.stringify(await runAgent({ model, tools: new Map(), profile: "mhqa", question: QUESTION })),
      );
    }
    await writeFile(join(dir, "native.jsonl"), `${lines.join("\n")}\n`);
    const rates: number[] = [];
    const sftStart = performance.now();
    const sft = await runSft(
      { data: dir, out: join(dir, "sft"), steps: 6, batchTokens: 4096, evalEvery: 0, checkpointEvery: 6 },
      engine,
      { onStep: (m) => rates.push(m.tokens_per_s) },
    );
    const sftS = (performance.now() - sftStart) / 1000;
    const rate = rates.reduce((a, b) => a + b, 0) / rates.length;
    console.log(
      `sft: ${sft.steps} steps of ≤4096 padded tokens, ${(sftS / sft.steps).toFixed(2)} s/step with checkpoint and report; engine ${Math.round(rate)} tok/s`,
    );

    const config = RlConfig.parse({
      tasks: "bench",
      out: join(dir, "rl"),
      steps: 2,
      groupSize: 4,
      batchTasks: 2,
      dynamicSampling: false,
      rollout: { profile: "mhqa", maxTokensPerTurn: 64, maxTurns: 2, maxResponseTokens: 128, concurrency: 8 },
    });
    const tasks = [
      { id: "b1", question: QUESTION, answers: ["a"], kind: "multihop" as const, source: "bench", meta: {} },
    ];
    await runRl(
      config,
      tasks,
      {
        client: engine,
        runEpisode: agentEpisodes({ model: engine, tools: new Map(), rollout: config.rollout }),
        score: (task, prediction) => scoreTask(task, prediction),
        detokenize: (ids) => engine.detokenize(ids),
      },
      {
        onStep: (m) =>
          console.log(
            `rl step ${m.step}: ${m.samples} episodes, rollout ${m.rollout_s.toFixed(1)} s (${Math.round(m.rollout_tokens_per_s)} generated tok/s), update ${m.update_s.toFixed(1)} s (${Math.round(m.update_tokens_per_s)} tok/s, ${m.updates} optimizer steps)`,
          ),
      },
    );
  } finally {
    await engine.close();
    await rm(dir, { recursive: true, force: true });
  }
}
