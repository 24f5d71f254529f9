import { describe, expect, it } from "vitest";
import { questionFromPrompt, verlRowToTask } from "./verl-parquet.js";

describe("verl rows written by our own exporter", () => {
  it("take id, question, answers and kind from extra_info and ability", () => {
    const row = {
      data_source: "world",
      prompt: [
        { role: "system", content: "You are an agent…" },
        { role: "user", content: "Who mentored the founder of Acme?" },
      ],
      ability: "multihop",
      reward_model: { style: "rule", ground_truth: "Ada Vell|A. Vell" },
      extra_info: {
        index: 4n,
        split: "train",
        task_id: "world-17",
        question: "Who mentored the founder of Acme?",
        answers: ["Ada Vell", "A. Vell"],
      },
    };
    expect(verlRowToTask(row, { file: "train.parquet", unit: "row", n: 4 })).toEqual({
      id: "world-17",
      question: "Who mentored the founder of Acme?",
      answers: ["Ada Vell", "A. Vell"],
      kind: "multihop",
      source: "world",
      meta: { dataSource: "world", ability: "multihop", rowIndex: 4, index: 4, split: "train" },
    });
  });
});

describe("question extraction from AFM-style prompts", () => {
  it("keeps what follows the first Task: line and drops a trailing answer-format note", () => {
    const content =
      "Tools: think, plan, code…\r\nTask: Add 2 and 3.\r\nPrint the sum.\nAnswer format: ```py …```";
    expect(questionFromPrompt([{ role: "user", content }])).toBe("Add 2 and 3.\nPrint the sum.");
    expect(questionFromPrompt([{ role: "user", content: "What is 2+2?" }])).toBe("What is 2+2?");
  });
});
