import { mkdtemp, readdir, readFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { expect, it } from "vitest";
import { ScriptedModel } from "../model/testing/index.js";
import { generateWorld, loadTasks, Plan, writeWorld } from "../tasks/index.js";
import { devProbe } from "./dev-probe.js";

it("a dev probe answers the first dev tasks with the model and reports success and copy accuracy", async () => {
  const dir = await mkdtemp(path.join(os.tmpdir(), "coa-dev-probe-"));
  await writeWorld(dir, generateWorld(3, "tiny", { maxHops: 2 }));
  const { tasks } = await loadTasks(dir, { split: "dev" });
  // A model that searches the question's first subject, then answers right: every copy made.
  const model = new ScriptedModel(({ prompt }) => {
    const task = tasks.find((t) => prompt.includes(`Question: ${t.question}\n`))!;
    const first = Plan.parse(task.meta.plan).steps[0];
    const searched = prompt.slice(prompt.indexOf(`Question: ${task.question}`)).includes("<observation>");
    return first?.op === "lookup" && typeof first.subject === "string" && !searched
      ? `<think>look</think>\n<web_search>${first.subject}</web_search>`
      : `<think>known</think>\n<answer>${task.answers[0]}</answer>`;
  });
  const tasksFile = path.join(dir, "tasks", "dev.jsonl");
  const runDir = path.join(dir, "sft");
  const probe = await devProbe(model, { tasks: dir, limit: 3, every: 5, runDir, searchTopK: 3 });
  expect(probe.every).toBe(5);
  const measured = await probe.run(10);
  expect(measured.dev_entity_copy).toBe(1);
  expect(measured.dev_success).toBe(1);
  expect(await readdir(path.join(runDir, "dev"))).toEqual(["step-000010"]);
  const summary = JSON.parse(await readFile(path.join(runDir, "dev", "step-000010", "summary.json"), "utf8"));
  expect(summary.success.pass1).toBe(1);
  await expect(
    devProbe(model, { tasks: tasksFile, limit: 1, every: 1, runDir, searchTopK: 3 }),
  ).resolves.toBeDefined();
});
