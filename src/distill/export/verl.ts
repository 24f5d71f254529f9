import type { SchemaElement } from "hyparquet";
import { parquetWriteBuffer } from "hyparquet-writer";
import { chatPrompt } from "./turns.js";
import type { Exporter, ExportInput } from "./types.js";

const text = (name: string): SchemaElement => ({
  name,
  type: "BYTE_ARRAY",
  converted_type: "UTF8",
  repetition_type: "OPTIONAL",
});
const list = (name: string, element: SchemaElement[]): SchemaElement[] => [
  { name, repetition_type: "OPTIONAL", converted_type: "LIST", num_children: 1 },
  { name: "list", repetition_type: "REPEATED", num_children: 1 },
  ...element,
];
const group = (name: string, children: SchemaElement[][]): SchemaElement[] => [
  { name, repetition_type: "OPTIONAL", num_children: children.length },
  ...children.flat(),
];

/** The column layout of verl's RL parquet (as its preprocessors and AFM's released data write it). */
const SCHEMA: SchemaElement[] = [
  { name: "schema", repetition_type: "REQUIRED", num_children: 5 },
  text("data_source"),
  ...list("prompt", group("element", [[text("content")], [text("role")]])),
  text("ability"),
  ...group("reward_model", [[text("ground_truth")], [text("style")]]),
  ...group("extra_info", [
    [{ name: "index", type: "INT64", repetition_type: "OPTIONAL" }],
    [text("split")],
    [text("task_id")],
    [text("question")],
    list("answers", [text("element")]),
  ]),
];

/** Gold answers for rule-based rewards: one string, alternatives separated by `|`; the list is in extra_info. */
export const groundTruth = (answers: readonly string[]): string => answers.join("|");

/** One row per task: the chat prompt (system prompt + question) and the gold answers. */
export function verlParquet({
  tasks,
  profile,
  split,
}: Pick<ExportInput, "tasks" | "profile" | "split">): Uint8Array {
  const buffer = parquetWriteBuffer({
    schema: SCHEMA,
    columnData: [
      { name: "data_source", data: tasks.map((t) => t.source) },
      { name: "prompt", data: tasks.map((t) => chatPrompt({ profile, question: t.question })) },
      { name: "ability", data: tasks.map((t) => t.taskKind) },
      {
        name: "reward_model",
        data: tasks.map((t) => ({ style: "rule", ground_truth: groundTruth(t.answers) })),
      },
      {
        name: "extra_info",
        data: tasks.map((t, i) => ({
          index: BigInt(i),
          split,
          task_id: t.taskId,
          question: t.question,
          answers: t.answers,
        })),
      },
    ],
  });
  return new Uint8Array(buffer);
}

export const exportVerl: Exporter = (input) => [
  { path: `verl/${input.split}.parquet`, content: verlParquet(input), records: input.tasks.length },
];
