import { readFile } from "node:fs/promises";
import path from "node:path";
import { expect, it } from "vitest";
import { DistillConfig, runDistill } from "../../distill/index.js";
import { RoleTable, runImport } from "../../importers/index.js";
import { ByteTokenizer } from "../../model/index.js";
import { type FakeModel, startFakeServer } from "../../model/testing/index.js";
import { loadTasks } from "../../tasks/index.js";
import { worldFixture } from "../../teacher/testing.js";
import { parseFlags } from "../flags.js";
import { CompareCostsFlags, runCompareCosts } from "./compare-costs.js";
import { EvalFlags } from "./eval.js";
import { runEval } from "./eval-run.js";
import { TeachFlags, teach } from "./teach.js";
import { runTeam, TeamFlags } from "./team.js";

it("the framework team, coa's teacher and the CoA trajectory, compared on the same test tasks", async () => {
  const { dir } = await worldFixture("tiny", 2);
  const at = (name: string) => path.join(dir, name);
  const run = { tasks: dir, split: "test", limit: "3", seed: "0", searchTool: "web_search" };
  const spans = await runTeam(TeamFlags.parse({ ...run, out: at("team") }), () => {});
  const { tasks } = await loadTasks(dir, { split: "test" });
  const tokenizer = new ByteTokenizer();
  const roles = RoleTable.parse({});
  await runImport({ input: spans, from: "openai-agents", tasks, roles, tokenizer, out: at("imported") });
  const teachFlags = { ...run, driver: "expert", api: "completions", concurrency: "1", out: at("teach") };
  await teach(TeachFlags.parse(teachFlags), () => {});
  const config = DistillConfig.parse({});
  await runDistill({ traces: at("teach"), out: at("data"), formats: ["native"], config });

  const flags = CompareCostsFlags.parse({
    traces: [`framework=${at("imported")}`, at("teach")],
    data: at("data"),
    out: at("costs"),
  });
  const { comparison, markdown } = await runCompareCosts(flags, "coa compare-costs …");
  expect(comparison.systems).toEqual(["framework", "teach", "CoA trajectory"]);
  expect(comparison.tasks).toBeGreaterThanOrEqual(2);
  const all = comparison.byKind.at(-1)!;
  expect(all.kind).toBe("all");
  const [framework, teacher, coa] = comparison.systems.map((s) => all.costs[s]!);
  // The framework sends instructions, tool schemas and the whole history on every call.
  expect(framework!.billedTokensPerTask).toBeGreaterThan(teacher!.billedTokensPerTask);
  expect(teacher!.billedTokensPerTask).toBeGreaterThan(coa!.billedTokensPerTask);
  expect(coa!.processedTokensPerTask).toBeLessThan(coa!.billedTokensPerTask);
  expect(await readFile(at("costs/costs.md"), "utf8")).toBe(markdown);
  const json = JSON.parse(await readFile(at("costs/costs.json"), "utf8"));
  expect(json).toMatchObject({
    command: "coa compare-costs …",
    tokenizer: tokenizer.name,
    tasks: comparison.tasks,
  });
}, 60_000);

it("coa eval --compare-traces bills each MAS beside the evaluated model on the tasks both ran", async () => {
  const { dir } = await worldFixture("tiny", 3);
  const at = (name: string) => path.join(dir, name);
  const run = { tasks: dir, split: "test", limit: "3", seed: "0", searchTool: "web_search" };
  await teach(
    TeachFlags.parse({ ...run, driver: "expert", api: "completions", concurrency: "1", out: at("teach") }),
    () => {},
  );
  // A model that searches the question once, then answers with the gold: one short CoA context.
  const { tasks } = await loadTasks(dir, { split: "test", limit: 3 });
  const gold = (context: string) => tasks.find((t) => context.includes(t.question))!.answers[0]!;
  const model: FakeModel = (context) =>
    context.includes("</web_search>\n<observation>")
      ? `<answer>${gold(context)}</answer>`
      : `<web_search>${tasks.find((t) => context.includes(t.question))!.question}</web_search>`;
  const server = await startFakeServer("vllm", model, { chatTemplate: false });
  const logged: string[] = [];
  try {
    const flags = parseFlags(EvalFlags, {
      model: `${server.url}/v1`,
      tasks: dir,
      split: "test",
      limit: "3",
      out: at("eval"),
      k: "1",
      profile: "web",
      concurrency: "1",
      temperature: "0",
      seed: "0",
      compareTraces: [`teacher=${at("teach")}`],
    });
    const summary = await runEval(flags, (line) => logged.push(line));
    expect(summary.success.pass1).toBe(1);
    const costs = JSON.parse(await readFile(at("eval/costs.json"), "utf8"));
    expect(costs.systems).toEqual(["teacher", summary.model]);
    expect(costs.tasks).toBe(3);
    const all = costs.byKind.at(-1);
    expect(all.costs.teacher.billedTokensPerTask).toBeGreaterThan(
      all.costs[summary.model].billedTokensPerTask,
    );
    expect(logged.join("\n")).toContain(await readFile(at("eval/costs.md"), "utf8"));
  } finally {
    await server.close();
  }
}, 60_000);
