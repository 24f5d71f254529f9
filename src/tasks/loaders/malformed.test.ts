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
