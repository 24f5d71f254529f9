import { mkdtemp, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { parquetReadObjects } from "hyparquet";
import { describe, expect, it } from "vitest";
import { ByteTokenizer } from "../../model/index.js";
import {
  checkFormat,
  checkTrajectory,
  completionIds,
  parseCoa,
  renderObservation,
  Step,
  systemPrompt,
  Trajectory,
  validateTrajectorySteps,
} from "../../protocol/index.js";
import { loadTasks } from "../../tasks/index.js";
import { buildTrajectory } from "../build.js";
import { convertTrace } from "../convert.js";
import { fullTrace, shortTrace } from "../testing/fixtures.js";
import { DATASET_INFO, EXPORTERS, type ExportInput, type SharegptRecord, TOOL_FUNCTIONS } from "./index.js";

const tok = new ByteTokenizer();
const traces = [
  fullTrace({ taskId: "full" }),
  shortTrace({ taskId: "short", answers: ["Mara Quist", "M. Quist"] }),
];
const trajectories = traces.map((trace) => {
  const c = convertTrace(trace, "all");
  if (!c.ok) throw new Error(c.detail);
  return buildTrajectory(trace, c.pieces, { tokenizer: tok, profile: "all", id: trace.taskId });
});
const input: ExportInput = {
  trajectories,
  tasks: traces.map(({ taskId, question, answers, source, taskKind }) => ({
    taskId,
    question,
    answers,
    source,
    taskKind,
  })),
  tokenizer: tok,
  profile: "all",
  split: "train",
};
const noSpans = (steps: Step[]) => steps.map(({ span, ...s }) => s);
/** The steps a trajectory holds, read from its ids. */
const stepsOf = (t: Trajectory) => noSpans(parseCoa(tok.decode(completionIds(t))).steps);
/** Observation texts of a trajectory, in order, read from its tool segments. */
const observationsOf = (t: Trajectory) =>
  t.segments.filter((s) => s.source === "tool").map((s) => parseCoa(tok.decode(s.ids)).steps[0]);

function file(format: keyof typeof EXPORTERS, name: string): string {
  const found = EXPORTERS[format](input).find((f) => f.path === name);
  if (!found || typeof found.content !== "string") throw new Error(`no ${name}`);
  return found.content;
}
const lines = (text: string) =>
  text
    .trimEnd()
    .split("\n")
    .map((l) => JSON.parse(l));

/** LLaMA-Factory's sharegpt check: user/observation on even turns, assistant/function on odd, even count. */
function sharegptShapeOk(record: SharegptRecord): boolean {
  const ok = record.conversations.every((turn, i) =>
    i % 2 === 0 ? ["human", "observation"].includes(turn.from) : ["gpt", "function_call"].includes(turn.from),
  );
  return ok && record.conversations.length % 2 === 0;
}

/** LLaMA-Factory's `thought_words`: the current default, and the bare tags older releases used. */
const THOUGHT_WORDS = {
  current: ["<think>\n", "\n</think>\n\n"],
  older: ["<think>", "</think>"],
} as const satisfies Record<string, readonly [string, string]>;

/**
 * What LLaMA-Factory's FunctionFormatter does to a function_call value, re-done here: cut the first
 * non-greedy `open(.*?)close` match (DOTALL) out of the text, everywhere it occurs, then JSON-parse
 * the rest as one call or a list of calls. A parse failure throws, as its RuntimeError does.
 */
function functionCallAsLlamaFactoryReadsIt(value: string, [open, close]: readonly [string, string]) {
  const literal = (s: string) => s.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
  const thought = new RegExp(`${literal(open)}(.*?)${literal(close)}`, "s").exec(value);
  const parsed = JSON.parse(thought ? value.replaceAll(thought[0], "") : value);
  const calls: { name: string; arguments: Record<string, string> }[] = Array.isArray(parsed)
    ? parsed
    : [parsed];
  return {
    thought: thought ? thought[1]! : null,
    calls: calls.map(({ name, arguments: a }) => ({ name, arguments: a })),
  };
}

/** A thought's steps: tagged role steps as written, untagged text as the think steps it came from. */
function thoughtSteps(thought: string): Step[] {
  const { steps, errors } = parseCoa(thought);
  const thinks: Step[] = errors
    .filter((e) => e.kind === "stray_text")
    .map((e) => ({ type: "think", text: thought.slice(e.span.start, e.span.end), span: e.span }));
  return [...steps, ...thinks].sort((a, b) => a.span!.start - b.span!.start);
}

describe("native export", () => {
  it("writes Trajectory records that parse back and pass the format check", () => {
    const records = lines(file("native", "native.jsonl")).map((r) => Trajectory.parse(r));
    expect(records).toEqual(trajectories);
    for (const t of records) expect(checkTrajectory(t, (ids) => tok.decode(ids)).problems).toEqual([]);
  });
});

describe("LLaMA-Factory export", () => {
  it("(a) holds the whole trajectory in one gpt turn, observations inline as <observation> spans", () => {
    const records: SharegptRecord[] = JSON.parse(file("llamafactory", "llamafactory/coa_single.json"));
    records.forEach((r, i) => {
      const t = trajectories[i]!;
      expect(sharegptShapeOk(r)).toBe(true);
      expect(r.system).toBe(systemPrompt("all"));
      expect(r.conversations[0]).toEqual({ from: "human", value: t.question });
      const gpt = r.conversations[1]!.value;
      expect(gpt).toBe(tok.decode(completionIds(t)));
      const check = checkFormat(gpt, "all");
      expect(check.errors).toEqual([]);
      // The <observation> spans are exactly the tool segments, in order.
      expect(check.steps.filter((s) => s.type === "observation")).toEqual(
        observationsOf(t).map((o) =>
          expect.objectContaining({ text: o!.type === "observation" ? o!.text : "" }),
        ),
      );
    });
  });

  it("(b) splits turns into function_call / observation, loadable the way LLaMA-Factory reads them", () => {
    const records: SharegptRecord[] = JSON.parse(file("llamafactory", "llamafactory/coa_multiturn.json"));
    records.forEach((r, i) => {
      const t = trajectories[i]!;
      expect(sharegptShapeOk(r)).toBe(true);
      expect(JSON.parse(r.tools!).map((f: { name: string }) => f.name)).toEqual([
        "web_search",
        "crawl_page",
        "code",
        "wiki_search",
      ]);
      const steps: Step[] = [];
      for (const turn of r.conversations.slice(1)) {
        if (turn.from === "observation") steps.push({ type: "observation", text: turn.value });
        else if (turn.from === "gpt") steps.push(...parseCoa(turn.value).steps);
        else {
          const { thought, calls } = functionCallAsLlamaFactoryReadsIt(turn.value, THOUGHT_WORDS.current);
          steps.push(...thoughtSteps(thought!));
          for (const call of calls) {
            const param = TOOL_FUNCTIONS[call.name as keyof typeof TOOL_FUNCTIONS].param;
            steps.push(Step.parse({ type: "tool_call", tool: call.name, args: call.arguments[param] }));
          }
        }
      }
      expect(noSpans(steps)).toEqual(stepsOf(t));
      expect(validateTrajectorySteps(steps, "all")).toEqual([]);
    });
  });

  it.each(Object.entries(THOUGHT_WORDS))(
    "(b) every function_call turn parses with LLaMA-Factory's %s thought words, name and arguments intact",
    (_, words) => {
      const records: SharegptRecord[] = JSON.parse(file("llamafactory", "llamafactory/coa_multiturn.json"));
      records.forEach((r, i) => {
        const expected = stepsOf(trajectories[i]!).flatMap((s) =>
          s.type === "tool_call"
            ? [{ name: s.tool, arguments: { [TOOL_FUNCTIONS[s.tool].param]: s.args } }]
            : [],
        );
        const calls = r.conversations
          .filter((turn) => turn.from === "function_call")
          .flatMap((turn) => {
            const read = functionCallAsLlamaFactoryReadsIt(turn.value, words);
            expect(read.thought).not.toBeNull();
            return read.calls;
          });
        expect(expected.length).toBeGreaterThan(0);
        expect(calls).toEqual(expected);
      });
    },
  );

  it("registers both files in dataset_info.json with sharegpt tags", () => {
    const info = JSON.parse(file("llamafactory", "llamafactory/dataset_info.json"));
    expect(info).toEqual(DATASET_INFO);
    expect(info.coa_multiturn.tags.function_tag).toBe("function_call");
    const files = EXPORTERS.llamafactory(input).map((f) => f.path);
    for (const entry of Object.values(info) as { file_name: string }[])
      expect(files).toContain(`llamafactory/${entry.file_name}`);
  });
});

describe("TRL export", () => {
  it("writes conversational messages: assistant turns as written, tool turns holding the observations", () => {
    lines(file("trl", "trl.jsonl")).forEach((r, i) => {
      const t = trajectories[i]!;
      const messages: { role: string; content: string; name?: string }[] = r.messages;
      expect(messages.slice(0, 2)).toEqual([
        { role: "system", content: systemPrompt("all") },
        { role: "user", content: t.question },
      ]);
      const rest = messages.slice(2);
      expect(rest.map((m) => m.role)).toEqual(
        t.segments.map((s) => (s.source === "model" ? "assistant" : "tool")),
      );
      const text = rest.map((m) => (m.role === "tool" ? renderObservation(m.content) : m.content)).join("");
      expect(noSpans(parseCoa(text).steps)).toEqual(stepsOf(t));
      expect(checkFormat(text, "all").errors).toEqual([]);
      for (const m of rest.filter((m) => m.role === "assistant"))
        expect(parseCoa(m.content, { modelOutput: true }).errors).toEqual([]);
    });
  });
});

describe("OpenAI export", () => {
  it("weights model turns 1 and observation turns 0; together they are the completion text", () => {
    lines(file("openai", "openai.jsonl")).forEach((r, i) => {
      const t = trajectories[i]!;
      const assistant: { content: string; weight: number }[] = r.messages.slice(2);
      expect(r.messages.slice(0, 2).map((m: { role: string }) => m.role)).toEqual(["system", "user"]);
      expect(assistant.map((m) => m.content).join("")).toBe(tok.decode(completionIds(t)));
      expect(checkFormat(assistant.map((m) => m.content).join(""), "all").errors).toEqual([]);
      for (const m of assistant) {
        const steps = parseCoa(m.content, { modelOutput: m.weight === 1 });
        expect(steps.errors).toEqual([]);
        // Weight 0 exactly on the observation spans: each such turn is one observation and nothing else.
        if (m.weight === 0) expect(steps.steps.map((s) => s.type)).toEqual(["observation"]);
        else expect(steps.steps.some((s) => s.type === "observation")).toBe(false);
      }
    });
  });
});

describe("verl export", () => {
  const parquet = EXPORTERS.verl(input)[0]!;

  it("writes verl's RL columns, readable by an independent parquet reader", async () => {
    expect(parquet.path).toBe("verl/train.parquet");
    const bytes = parquet.content as Uint8Array;
    const rows = await parquetReadObjects({
      file: bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.byteLength) as ArrayBuffer,
    });
    expect(rows).toHaveLength(2);
    expect(rows[1]).toEqual({
      data_source: "world",
      prompt: [
        { role: "system", content: systemPrompt("all") },
        { role: "user", content: "Who founded Acme Robotics?" },
      ],
      ability: "multihop",
      reward_model: { style: "rule", ground_truth: "Mara Quist|M. Quist" },
      extra_info: {
        index: 1n,
        split: "train",
        task_id: "short",
        question: "Who founded Acme Robotics?",
        answers: ["Mara Quist", "M. Quist"],
      },
    });
  });

  it("loads back as tasks through the project's own verl loader", async () => {
    const dir = await mkdtemp(path.join(tmpdir(), "coa-verl-"));
    const out = path.join(dir, "train.parquet");
    await writeFile(out, parquet.content);
    const { tasks } = await loadTasks(out);
    expect(tasks.map((t) => [t.id, t.question, t.answers, t.kind, t.source])).toEqual(
      traces.map((t) => [t.taskId, t.question, t.answers, t.taskKind, t.source]),
    );
  });
});
