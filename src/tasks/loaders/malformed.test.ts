import { execFileSync } from "node:child_process";
import { mkdir, mkdtemp, readFile, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { parquetWriteBuffer } from "hyparquet-writer";
import { beforeAll, describe, expect, it } from "vitest";
import { parseFieldMap } from "./field-map.js";
import { loadTasks } from "./load-tasks.js";
import { verlRowToTask } from "./verl-parquet.js";

let dir: string;
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "coa-loaders-"));
});

async function file(name: string, content: string | Uint8Array | ArrayBuffer): Promise<string> {
  const path = join(dir, name);
  await writeFile(path, content instanceof ArrayBuffer ? new Uint8Array(content) : content);
  return path;
}

const qa = (question: unknown, answer: unknown) => JSON.stringify({ question, answer, data_source: "nq" });

describe("malformed JSONL", () => {
  it("a truncated line names file and line", async () => {
    const path = await file("truncated.jsonl", `${qa("q1", ["a"])}\n{"question": "q2", "answer": ["b"\n`);
    await expect(loadTasks(path)).rejects.toThrow(/truncated\.jsonl line 2: not valid JSON \(/);
  });

  it("a missing field names file, line and field", async () => {
    const path = await file("missing.jsonl", `${qa("q1", ["a"])}\n${qa("q2", ["b"])}\n{"question": "q3"}\n`);
    await expect(loadTasks(path)).rejects.toThrow(
      'missing.jsonl line 3, field "answer": expected a string or an array of strings, got nothing (field missing)',
    );
  });

  it("a wrong type names file, line and field", async () => {
    const path = await file("wrong.jsonl", `${qa("q1", ["a"])}\n${qa(42, ["b"])}\n${qa("q3", [{ x: 1 }])}\n`);
    await expect(loadTasks(path)).rejects.toThrow(
      'wrong.jsonl line 2, field "question": expected a non-empty question string, got number',
    );
  });

  it("skipBad keeps the good rows and counts the bad ones with reasons", async () => {
    const text = [
      qa("q1", ["a"]),
      '{"question": "q2", "ans',
      qa("", "x"),
      qa("q4", 7),
      qa("q5", [null]),
    ].join("\n");
    const path = await file("mixed.jsonl", text);
    const { tasks, skipped } = await loadTasks(path, { skipBad: true });
    expect(tasks.map((t) => [t.question, t.answers])).toEqual([
      ["q1", ["a"]],
      ["q4", ["7"]],
    ]);
    expect(skipped).toEqual([
      { where: `${path} line 2`, field: null, reason: expect.stringMatching(/^not valid JSON/) },
      {
        where: `${path} line 3`,
        field: "question",
        reason: "expected a non-empty question string, got an empty string",
      },
      {
        where: `${path} line 5`,
        field: "answer",
        reason: "expected a string or an array of strings, got array",
      },
    ]);
  });

  it("a Task JSONL row with a bad kind is rejected by the Task schema", async () => {
    const row = (kind: string) =>
      JSON.stringify({ id: "t1", question: "q", answers: ["a"], kind, source: "x" });
    const path = await file("tasks.jsonl", `${row("qa")}\n${row("poetry")}\n`);
    await expect(loadTasks(path)).rejects.toThrow(/tasks\.jsonl line 2, field "kind": Invalid option/);
  });

  it("rows of an unknown layout ask for a field map", async () => {
    const path = await file("custom.jsonl", `${JSON.stringify({ q: "who?", golds: ["me"] })}\n`);
    await expect(loadTasks(path)).rejects.toThrow(
      /custom\.jsonl: cannot tell the row layout; pass a field map/,
    );
  });
});

describe("field mapping", () => {
  it("maps arbitrary fields, dotted paths included, and keeps the rest in meta", async () => {
    const rows = [
      { qid: "a1", q: "Capital of France?", gold: { all: ["Paris", "paris"] }, hops: 1 },
      { qid: "a2", q: "2+2?", gold: { all: 4 }, hops: 0 },
    ];
    const path = await file("mapped.jsonl", rows.map((r) => JSON.stringify(r)).join("\n"));
    const { format, tasks } = await loadTasks(path, {
      map: "question=q,answers=gold.all,id=qid",
      kind: "web_qa",
    });
    expect(format).toBe("mapped-jsonl");
    expect(tasks).toEqual([
      {
        id: "a1",
        question: "Capital of France?",
        answers: ["Paris", "paris"],
        kind: "web_qa",
        source: "mapped",
        meta: { hops: 1, line: 1 },
      },
      {
        id: "a2",
        question: "2+2?",
        answers: ["4"],
        kind: "web_qa",
        source: "mapped",
        meta: { hops: 0, line: 2 },
      },
    ]);
  });

  it("rejects a malformed --map spec", () => {
    expect(() => parseFieldMap("question=q")).toThrow("--map: missing answers");
    expect(() => parseFieldMap("question=q,answers=a,golds=b")).toThrow('--map: unknown target "golds"');
    expect(() => parseFieldMap("question")).toThrow('--map: "question" is not target=field');
  });
});

describe("malformed JSON and parquet", () => {
  it("a JSON file that is not an array", async () => {
    const path = await file("obj.json", '{"question": "q"}');
    await expect(loadTasks(path)).rejects.toThrow(/obj\.json: expected a JSON array of rows/);
  });

  it("a broken parquet file", async () => {
    const path = await file("broken.parquet", "PAR1 this is not really parquet");
    await expect(loadTasks(path)).rejects.toThrow(/broken\.parquet: not a readable parquet file \(/);
  });

  it("a parquet file cut short", async () => {
    const real = fileURLToPath(new URL("../../../../shared/benchmarks/aime24.parquet", import.meta.url));
    const bytes = await readFile(real).catch(() => null);
    if (!bytes) return console.warn("skipped: aime24.parquet not found");
    const path = await file("cut.parquet", bytes.subarray(0, bytes.length / 2));
    await expect(loadTasks(path)).rejects.toThrow(/cut\.parquet: not a readable parquet file/);
  });

  it("a parquet whose prompt column is not chat messages names row and field", async () => {
    const buffer = parquetWriteBuffer({
      columnData: [
        { name: "data_source", data: ["math500", "math500"], type: "STRING" },
        { name: "prompt", data: ["What is 1+1?", "What is 2+2?"], type: "STRING" },
      ],
    });
    const path = await file("flat.parquet", buffer);
    await expect(loadTasks(path)).rejects.toThrow(
      /flat\.parquet row 0, field "prompt": Invalid input: expected array/,
    );
  });

  it("code ground truth that is not JSON, or has unequal test lists, names the field", () => {
    const row = (ground_truth: string) => ({
      data_source: "livecodebench",
      prompt: [{ role: "user", content: "Task: print 1" }],
      ability: "coding",
      reward_model: { style: "rule", ground_truth },
    });
    const ref = { file: "lcb.parquet", unit: "row" as const, n: 3 };
    expect(() => verlRowToTask(row('{"stdin": ["1\\n"], "expected_output": '), ref)).toThrow(
      /lcb\.parquet row 3, field "reward_model\.ground_truth": not valid JSON/,
    );
    expect(() => verlRowToTask(row('{"stdin": ["1\\n", "2\\n"], "expected_output": ["1\\n"]}'), ref)).toThrow(
      'lcb.parquet row 3, field "reward_model.ground_truth": 2 stdin cases but 1 expected outputs',
    );
    expect(() => verlRowToTask(row('{"stdin": [1], "expected_output": ["1"]}'), ref)).toThrow(
      'lcb.parquet row 3, field "reward_model.ground_truth.stdin.0": Invalid input: expected string, received number',
    );
  });
});

describe("world directories", () => {
  it("reads tasks/<split>.jsonl and lists the splits when none is given", async () => {
    const world = join(dir, "world");
    await mkdir(join(world, "tasks"), { recursive: true });
    await writeFile(join(world, "world.json"), "{}");
    const task = {
      id: "w-1",
      question: "Who founded Acme?",
      answers: ["Ada"],
      kind: "multihop",
      source: "world",
      meta: { hops: 2 },
    };
    await writeFile(join(world, "tasks", "dev.jsonl"), `${JSON.stringify(task)}\n`);
    await writeFile(join(world, "tasks", "test.jsonl"), "");
    const { format, tasks } = await loadTasks(world, { split: "dev" });
    expect(format).toBe("world");
    expect(tasks).toEqual([task]);
    await expect(loadTasks(world)).rejects.toThrow(/world: world dir: choose a split \(dev, test\)/);
    await expect(loadTasks(world, { split: "rl" })).rejects.toThrow('no split "rl"');
  });

  it("a directory without world.json is refused", async () => {
    await expect(loadTasks(dir)).rejects.toThrow("a directory must be a world (no world.json)");
  });
});

describe("hostile task files say what is wrong, with file and line", () => {
  it("an empty file, and one of only blank lines", async () => {
    await expect(loadTasks(await file("empty.jsonl", ""))).rejects.toThrow(/empty\.jsonl: file is empty$/);
    await expect(loadTasks(await file("empty.json", ""))).rejects.toThrow(/empty\.json: file is empty$/);
    await expect(loadTasks(await file("blank.jsonl", "\n  \n\t\n"))).rejects.toThrow(
      /blank\.jsonl: file has only blank lines, no rows$/,
    );
    await expect(loadTasks(await file("empty-array.json", " [] "))).rejects.toThrow(
      /empty-array\.json: the JSON array is empty, no rows$/,
    );
  });

  it("binary garbage fails on its first line as not JSON, with control characters escaped", async () => {
    const garbage = new Uint8Array([
      0x00, 0xff, 0x1b, 0x5b, 0x33, 0x31, 0x6d, 0x07, 0x9b, 0x01, 0x0a, 0xfe, 0x80,
    ]);
    const path = await file("garbage", garbage);
    const err = await loadTasks(path).then(
      () => expect.unreachable("garbage loaded"),
      (e: Error) => e,
    );
    expect(err.message).toMatch(/garbage line 1: not valid JSON \(/);
    expect(err.message).toContain("\\x1b[31m");
    expect(err.message).not.toMatch(/[\u0000-\u0008\u001b\u007f-\u009f]/);
  });

  it.each([
    ["42", "number"],
    ["null", "null"],
    ["[]", "array"],
    ['"text"', "string"],
  ])("rows that are %s are not objects", async (row, type) => {
    const path = await file(`rows-${type}.jsonl`, `\n\n${row}\n${row}\n`);
    await expect(loadTasks(path)).rejects.toThrow(
      new RegExp(`rows-${type}\\.jsonl line 3: a row must be a JSON object, got ${type}$`),
    );
  });

  it("a JSON array of non-objects names the row", async () => {
    const path = await file("numbers.json", "[42, 43]");
    await expect(loadTasks(path)).rejects.toThrow(
      /numbers\.json row 0: a row must be a JSON object, got number$/,
    );
  });

  it("with skipBad, non-object rows are skipped and the object rows still set the layout", async () => {
    const path = await file("some-objects.jsonl", `42\n${qa("q", ["a"])}\nnull\n`);
    const { tasks, skipped } = await loadTasks(path, { skipBad: true });
    expect(tasks.map((t) => t.question)).toEqual(["q"]);
    expect(skipped.map((s) => [s.where, s.reason])).toEqual([
      [`${path} line 1`, "a row must be a JSON object, got number"],
      [`${path} line 3`, "a row must be a JSON object, got null"],
    ]);
  });

  it("200k-deep nesting is refused before parsing, not a stack overflow", async () => {
    const deep = (d: number) => `${"[".repeat(d)}${"]".repeat(d)}`;
    const jsonl = await file("deep.jsonl", `${qa("q", ["a"])}\n{"question": ${deep(200_000)}}\n`);
    await expect(loadTasks(jsonl)).rejects.toThrow(/deep\.jsonl line 2: nested deeper than 100 levels$/);
    const deepObj = `${'{"a":'.repeat(200_000)}1${"}".repeat(200_000)}`;
    const json = await file("deep.json", `[\n${qa("q", ["a"])},\n${deepObj}\n]`);
    await expect(loadTasks(json)).rejects.toThrow(
      /deep\.json: line 3: a row is nested deeper than 100 levels$/,
    );
    // Brackets inside strings are text, not nesting.
    const path = await file("brackets.jsonl", `${qa("[".repeat(1000), ["{".repeat(1000)])}\n`);
    expect((await loadTasks(path)).tasks).toHaveLength(1);
  });

  it.skipIf(process.platform === "win32")("a FIFO is refused without opening it", async () => {
    const fifo = join(dir, "tasks.fifo.jsonl");
    execFileSync("mkfifo", [fifo]);
    await expect(loadTasks(fifo)).rejects.toThrow(/tasks\.fifo\.jsonl: not a regular file \(a FIFO\)$/);
    await expect(loadTasks("/dev/null")).rejects.toThrow("/dev/null: not a regular file (a device)");
  });

  it("a repeated task id names both lines and the id", async () => {
    const row = (id: string, question: string) =>
      JSON.stringify({ id, question, answers: ["a"], kind: "qa", source: "x" });
    const path = await file("dup.jsonl", [row("t1", "q1"), row("t2", "q2"), "", row("t1", "q3")].join("\n"));
    await expect(loadTasks(path)).rejects.toThrow(
      'dup.jsonl line 4, field "id": duplicate task id "t1" (already at line 1)',
    );
    const { tasks, skipped } = await loadTasks(path, { skipBad: true });
    expect(tasks.map((t) => t.question)).toEqual(["q1", "q2"]);
    expect(skipped).toEqual([
      { where: `${path} line 4`, field: "id", reason: 'duplicate task id "t1" (already at line 1)' },
    ]);
  });

  it("a repeated mapped id is refused too", async () => {
    const rows = [
      { q: "a?", g: "1", qid: 7 },
      { q: "b?", g: "2", qid: "7" },
    ];
    const path = await file("dup-mapped.json", JSON.stringify(rows));
    await expect(loadTasks(path, { map: "question=q,answers=g,id=qid" })).rejects.toThrow(
      'dup-mapped.json row 1, field "id": duplicate task id "7" (already at row 0)',
    );
  });
});
