import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { ByteTokenizer, TOKENIZER_FILE, type Tokenizer, trainBpe } from "../../model/index.js";
import {
  emptyTrajectoryStats,
  renderObservation,
  renderPrompt,
  type Trajectory,
} from "../../protocol/index.js";
import { validateFile } from "./validate.js";

const tok = new ByteTokenizer();
const question = "Who wrote Dune?";

function record(completion: [source: "model" | "tool", text: string][], t: Tokenizer = tok): Trajectory {
  return {
    version: 2,
    id: "r",
    question,
    profile: "mhqa",
    model: "scripted",
    tokenizer: t.name,
    promptIds: t.encode(renderPrompt({ profile: "mhqa", question })),
    segments: completion.map(([source, text]) => ({ source, ids: t.encode(text) })),
    answer: "Frank Herbert",
    finishReason: "answer",
    stats: emptyTrajectoryStats(),
    origin: "run",
    meta: {},
  };
}

const valid = record([
  ["model", "<think>search it</think>\n<wiki_search>Dune author</wiki_search>"],
  ["tool", renderObservation("Dune is a 1965 novel by Frank Herbert.")],
  ["model", "<answer>Frank Herbert</answer>"],
]);

async function validate(lines: string[], profile?: "web", beside?: Tokenizer) {
  const dir = mkdtempSync(join(tmpdir(), "coa-validate-"));
  const file = join(dir, "t.jsonl");
  writeFileSync(file, `${lines.join("\n")}\n`);
  if (beside) writeFileSync(join(dir, TOKENIZER_FILE), JSON.stringify(beside));
  const reported: string[] = [];
  const summary = await validateFile(file, profile, (line) => reported.push(line.slice(file.length)));
  return { summary, reported };
}

describe("coa validate", () => {
  it("passes valid byte-tokenizer records", async () => {
    const { summary, reported } = await validate([JSON.stringify(valid), "", JSON.stringify(valid)]);
    expect(reported).toEqual([]);
    expect(summary).toMatchObject({ records: 2, invalid: 0 });
  });

  it("reports bad JSON, schema errors and protocol errors by line and field", async () => {
    const stray = record([["model", "<think>t</think> oops <answer>Frank Herbert</answer>"]]);
    const { summary, reported } = await validate([
      JSON.stringify(valid),
      "{not json",
      JSON.stringify({ ...valid, segments: [{ source: "model", ids: ["x"] }] }),
      JSON.stringify(stray),
    ]);
    expect(reported).toEqual([
      expect.stringMatching(/^:2: \(line\): invalid JSON: /),
      ":3: segments.0.ids.0: Invalid input: expected number, received string",
      ":4: segments[0]: stray_text: text outside any tag (characters 17-21)",
    ]);
    expect(summary).toMatchObject({ records: 4, invalid: 3 });
    expect(Object.fromEntries(summary.byKind)).toEqual({ record: 2, stray_text: 1 });
  });

  it("checks every record against --profile when given", async () => {
    const { reported } = await validate([JSON.stringify(valid)], "web");
    expect(reported).toEqual([
      ":1: segments[0]: disabled_tag: step 2: <wiki_search> is not enabled in profile web (characters 25-63)",
    ]);
  });

  it("decodes records of a BPE tokenizer whose file lies beside them", async () => {
    const bpe = trainBpe(["<think>search it</think> Frank Herbert wrote Dune, Dune author"], {
      vocabSize: tok.vocabSize + 20,
    });
    const stray = record([["model", "<think>t</think> oops <answer>Frank Herbert</answer>"]], bpe);
    const { summary, reported } = await validate([JSON.stringify(stray)], undefined, bpe);
    expect(reported).toEqual([":1: segments[0]: stray_text: text outside any tag (characters 17-21)"]);
    expect(summary.undecoded.size).toBe(0);
  });

  it("schema-checks records of other tokenizers without decoding them", async () => {
    const { summary, reported } = await validate([
      JSON.stringify({ ...valid, tokenizer: "Qwen/Qwen3-0.6B" }),
    ]);
    expect(reported).toEqual([]);
    expect(summary).toMatchObject({ records: 1, invalid: 0 });
    expect(summary.undecoded.get("Qwen/Qwen3-0.6B")).toBe(1);
  });
});
