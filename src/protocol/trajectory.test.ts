import { mkdtemp, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { z } from "zod";
import { readJsonlTolerant } from "../util/index.js";
import { emptyTrajectoryStats, Trajectory, trajectorySchema, upgradeTrajectory } from "./trajectory.js";

/** The fields every record has, in the shape v1 and v2 share. */
const base = {
  id: "t1",
  taskId: "w-1",
  question: "In which year was Corvel Ltd founded?",
  profile: "mhqa",
  model: "micro",
  tokenizer: "coa-byte-v1",
  promptIds: [1, 2, 3],
  segments: [
    { source: "model", ids: [4, 5], logprobs: [-0.5, -0.25] },
    { source: "tool", ids: [6] },
    { source: "model", ids: [7] },
  ],
  answer: "1947",
  finishReason: "answer",
  stats: { ...emptyTrajectoryStats(), turns: 2, promptTokens: 3, modelTokens: 3, toolTokens: 1 },
};

const runtimeV1 = {
  budget: { maxTurns: 24, maxTokens: 2048, maxTimeMs: 600_000, maxFormatErrors: 3 },
  sampling: { temperature: 0, topP: 1, seed: 7, maxTokensPerTurn: 256 },
  calls: [
    {
      turn: 1,
      modelMs: 3.5,
      modelTokens: 2,
      finishReason: "stop",
      action: "tool",
      tool: "wiki_search",
      toolMs: 1,
    },
    { turn: 2, modelMs: 1.25, modelTokens: 1, finishReason: "stop", action: "answer" },
  ],
  formatErrors: [{ kind: "stray_text", message: "text outside tags", span: { start: 0, end: 3 } }],
  exactIds: false,
};
const verdict = {
  sample: 1,
  correct: true,
  error: null,
  scorer: "exact_match",
  selfScore: 5,
  answers: ["1947"],
};
const distillV1 = {
  source: "world",
  taskKind: "lookup",
  answers: ["1947", "in 1947"],
  driver: "expert",
  teacher: {
    agentCalls: 9,
    toolCalls: 2,
    replans: 0,
    reflections: 1,
    tokensIn: 900,
    tokensOut: 80,
    wallMs: 12,
  },
  trace: "runs/teach/traces.jsonl:4",
};

/** Records exactly as coa wrote them before v2: no `version`, one flat `meta`. */
const v1Eval = {
  ...base,
  reward: 1,
  origin: "eval",
  meta: { ...runtimeV1, answers: ["1947"], eval: verdict },
};
const v1Distill = { ...base, reward: 1, origin: "distill", meta: distillV1 };
const v1Served = {
  ...base,
  finishReason: "model_error",
  answer: null,
  origin: "serve",
  meta: { ...runtimeV1, error: "Error: refused", responseId: "chatcmpl-3" },
};

describe("Trajectory v1 → v2", () => {
  it("reads a v1 file: each record as v2, its meta keys in their writers' namespaces, values unchanged", async () => {
    const file = path.join(await mkdtemp(path.join(tmpdir(), "coa-traj-")), "v1.jsonl");
    await writeFile(file, [v1Eval, v1Distill, v1Served].map((r) => `${JSON.stringify(r)}\n`).join(""));
    const { records, bad } = await readJsonlTolerant(file, Trajectory);
    expect(bad).toEqual([]);
    const [evaluated, distilled, served] = records;

    expect(evaluated).toEqual({
      ...base,
      version: 2,
      reward: 1,
      origin: "eval",
      meta: { runtime: runtimeV1, eval: verdict },
    });
    expect(distilled).toEqual({
      ...base,
      version: 2,
      reward: 1,
      origin: "distill",
      meta: { distill: distillV1 },
    });
    expect(served?.meta).toEqual({
      runtime: { ...runtimeV1, error: "Error: refused" },
      serve: { responseId: "chatcmpl-3" },
    });
  });

  it("types the namespaces a reader asks for with their owners' schemas", () => {
    const Verdict = z.object({ correct: z.boolean(), answers: z.array(z.string()) });
    const Evaluated = trajectorySchema({ eval: Verdict });
    const t = Evaluated.parse(v1Eval);
    expect(t.meta.eval).toEqual({ correct: true, answers: ["1947"] });
    // A record without the namespace the reader needs is not one of its records.
    expect(Evaluated.safeParse(v1Distill).success).toBe(false);
  });

  it("keeps eval's gold answers once: beside an older verdict without them, they move into it", () => {
    const { answers: _, ...older } = verdict;
    const upgraded = Trajectory.parse({ ...base, origin: "eval", meta: { answers: ["1947"], eval: older } });
    expect(upgraded.meta).toEqual({ eval: verdict });
  });

  it("infers the origin a v1 record left out, and keeps keys no writer owns under legacy", () => {
    const eval_ = Trajectory.parse({ ...base, meta: { eval: verdict } });
    expect(eval_.origin).toBe("eval");
    const served = Trajectory.parse({ ...base, meta: { responseId: "chatcmpl-1" } });
    expect(served).toMatchObject({ origin: "serve", meta: { serve: { responseId: "chatcmpl-1" } } });
    // `answers` on a record that is neither eval's nor distill's belongs to no namespace.
    const run = Trajectory.parse({ ...base, meta: { answers: ["1947"], note: { by: "hand" } } });
    expect(run).toMatchObject({
      origin: "run",
      meta: { legacy: { answers: ["1947"], note: { by: "hand" } } },
    });
    expect(Trajectory.parse({ ...base }).meta).toEqual({});
  });

  it("passes v2 records through unchanged and rejects other versions", () => {
    const v2 = Trajectory.parse(v1Eval);
    expect(upgradeTrajectory(v2)).toBe(v2);
    expect(Trajectory.parse(JSON.parse(JSON.stringify(v2)))).toEqual(v2);
    expect(Trajectory.safeParse({ ...v2, version: 3 }).success).toBe(false);
    // v2 has no flat meta: a key outside the namespaces is not kept.
    expect(Trajectory.parse({ ...v2, meta: { ...v2.meta, answers: ["x"] } }).meta).toEqual(v2.meta);
  });

  it("tells records apart by origin, which v2 requires from a closed set", () => {
    const v2 = Trajectory.parse(v1Distill);
    const { origin: _, ...noOrigin } = v2;
    expect(Trajectory.safeParse(noOrigin).success).toBe(false);
    expect(Trajectory.safeParse({ ...v2, origin: "elsewhere" }).success).toBe(false);
  });
});
