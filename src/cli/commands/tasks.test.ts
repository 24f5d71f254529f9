import { mkdtemp, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { expect, it } from "vitest";
import { loadTasks } from "../../tasks/index.js";
import { inspectTasks } from "./tasks.js";

it("coa tasks inspect prints counts per kind and source, skipped rows and samples", async () => {
  const path = join(await mkdtemp(join(tmpdir(), "coa-inspect-")), "qa.jsonl");
  const rows = [
    { question: "who wrote hamlet", answer: ["Shakespeare", "William Shakespeare"], data_source: "nq" },
    { question: "capital of peru", answer: ["Lima"], data_source: "trivia" },
    { question: "broken row", answer: null, data_source: "nq" },
  ];
  await writeFile(path, rows.map((r) => JSON.stringify(r)).join("\n"));
  const report = inspectTasks(await loadTasks(path, { skipBad: true }), 1);
  expect(report.split("\n")).toEqual([
    `${path}: qa-jsonl, 2 tasks, 1 rows skipped`,
    "kinds: qa 2",
    "sources: nq 1, trivia 1",
    `skipped ${path} line 3 (answer): expected a string or an array of strings, got null`,
    "",
    "[nq-1] qa · nq",
    "  question: who wrote hamlet",
    "  answers: Shakespeare | William Shakespeare",
    "  meta: line",
  ]);
});

it("coa tasks inspect prints escape sequences from the file as visible text", async () => {
  const path = join(await mkdtemp(join(tmpdir(), "coa-inspect-")), "ansi.jsonl");
  const row = {
    question: "\u001b]0;pwned\u0007\u001b[2Jwho\u009b31m?",
    answer: ["\u001b[31mred"],
    data_source: "n\u001bq",
  };
  await writeFile(path, JSON.stringify(row));
  const report = inspectTasks(await loadTasks(path), 1);
  expect(report).not.toMatch(/[\u0000-\u0009\u000b-\u001f\u007f-\u009f]/);
  expect(report).toContain("  question: \\x1b]0;pwned\\x07\\x1b[2Jwho\\x9b31m?");
  expect(report).toContain("  answers: \\x1b[31mred");
  expect(report).toContain("[n\\x1bq-1] qa · n\\x1bq");
});
