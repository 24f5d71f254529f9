import { mkdtemp, readdir, readFile, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { Trajectory } from "../protocol/index.js";
import { DistilledTrajectory } from "./build.js";
import { DistillConfig } from "./config.js";
import { EXPORT_FORMATS } from "./export/index.js";
import { runDistill } from "./pipeline.js";
import { conversation, fullTrace, shortTrace, traceOf } from "./testing/fixtures.js";

async function teachRun(): Promise<string> {
  const dir = await mkdtemp(path.join(tmpdir(), "coa-distill-"));
  const unknownAgent = JSON.stringify(shortTrace({ taskId: "odd" })).replace(
    '"from":"verifier"',
    '"from":"oracle"',
  );
  const lines = [
    JSON.stringify(fullTrace({ taskId: "full" })),
    JSON.stringify(shortTrace({ taskId: "short" })),
    JSON.stringify(shortTrace({ taskId: "wrong", reward: 0 })),
    unknownAgent,
    JSON.stringify(shortTrace({ taskId: "dup" })),
    JSON.stringify(
      traceOf(
        conversation(
          ["manager", "user", "plan", "p"],
          ["searcher", "tool", "tool_call", "", { tool: { name: "web_search", args: "q" } }],
          ["manager", "user", "final", "A"],
        ),
        { taskId: "lost-observation", question: "What happened to the observation?" },
      ),
    ),
  ];
  const full = JSON.stringify(shortTrace({ taskId: "cut", question: "Where is the rest of this line?" }));
  await writeFile(path.join(dir, "traces.jsonl"), `${lines.join("\n")}\n${full.slice(0, full.length - 30)}`);
  return dir;
}

describe("runDistill", () => {
  it("skips bad traces with reasons, filters, and writes every export atomically", async () => {
    const traces = await teachRun();
    const out = path.join(traces, "data");
    const result = await runDistill({
      traces,
      out,
      formats: EXPORT_FORMATS,
      config: DistillConfig.parse({}),
    });

    expect(result.stages.map((s) => [s.stage, s.in, s.out])).toEqual([
      ["parse", 7, 5],
      ["correctness", 5, 4],
      ["format", 4, 3],
      ["budget", 3, 3],
      ["length", 3, 3],
      ["quality", 3, 3],
      ["dedup", 3, 2],
      ["balance", 2, 2],
    ]);
    const file = path.join(traces, "traces.jsonl");
    expect(result.drops.map((d) => [d.at, d.stage, d.reason])).toEqual([
      [`${file}:4`, "parse", "unknown_agent"],
      [`${file}:7`, "parse", "invalid_json"],
      [`${file}:3`, "correctness", "wrong_answer"],
      [`${file}:6`, "format", "missing_observation"],
      [`${file}:5`, "dedup", "near_duplicate"],
    ]);
    expect(result.kept.map((t) => t.taskId)).toEqual(["full", "short"]);
    // RL tasks come from every readable trace, whatever the teacher scored.
    expect(result.tasks).toBe(5);

    const native = (await readFile(path.join(out, "native.jsonl"), "utf8")).trimEnd().split("\n");
    expect(native.map((l) => Trajectory.parse(JSON.parse(l)).taskId)).toEqual(["full", "short"]);
    // v2, with the trace's facts in distill's own namespace, typed.
    const records = native.map((l) => DistilledTrajectory.parse(JSON.parse(l)));
    expect(records.map((t) => [t.version, t.origin, Object.keys(t.meta)])).toEqual([
      [2, "distill", ["distill"]],
      [2, "distill", ["distill"]],
    ]);
    expect(records.map((t) => [t.meta.distill.trace, t.meta.distill.answers, t.meta.distill.driver])).toEqual(
      [
        [`${file}:1`, fullTrace().answers, fullTrace().driver],
        [`${file}:2`, shortTrace().answers, shortTrace().driver],
      ],
    );
    // The same records as distill wrote them before v2 (no version, meta flat) read back equal.
    const v1 = records.map(({ version: _, meta, ...rest }) =>
      JSON.stringify({ ...rest, meta: meta.distill }),
    );
    expect(v1.map((l) => DistilledTrajectory.parse(JSON.parse(l)))).toEqual(records);
    const written = await readdir(out, { recursive: true });
    expect(written.sort()).toEqual(
      [
        "drops.jsonl",
        "funnel.json",
        "llamafactory",
        "llamafactory/coa_multiturn.json",
        "llamafactory/coa_single.json",
        "llamafactory/dataset_info.json",
        "native.jsonl",
        "openai.jsonl",
        "plots",
        "plots/funnel.svg",
        "plots/lengths.svg",
        "plots/tool-calls.svg",
        "report.md",
        "tokenizer.json",
        "trl.jsonl",
        "verl",
        "verl/train.parquet",
      ].sort(),
    );
    const report = await readFile(path.join(out, "report.md"), "utf8");
    expect(report).toContain("| parse | 7 | 5 | unknown_agent 1, invalid_json 1 |");
    expect(report).toContain("![lengths](plots/lengths.svg)");
    expect(report).toContain(`\`${file}:6\` format/missing_observation`);
    const svg = await readFile(path.join(out, "plots/tool-calls.svg"), "utf8");
    expect(svg).toContain('aria-label="tool calls: 1; count: 1"');
    expect(svg).toContain('aria-label="tool calls: 4; count: 1"');
  });

  it("replaces earlier outputs on a rerun", async () => {
    const traces = await teachRun();
    const out = path.join(traces, "data");
    const cfg = DistillConfig.parse({});
    await runDistill({ traces, out, formats: ["native"], config: cfg });
    await runDistill({ traces, out, formats: ["native"], config: { ...cfg, length: { maxTokens: 10 } } });
    expect(await readFile(path.join(out, "native.jsonl"), "utf8")).toBe("");
    const funnel = JSON.parse(await readFile(path.join(out, "funnel.json"), "utf8"));
    expect(funnel.stages.find((s: { stage: string }) => s.stage === "length").dropped).toEqual({
      too_long: 3,
    });
  });
});
