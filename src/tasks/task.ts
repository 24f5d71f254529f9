import { z } from "zod";

export const TaskKind = z.enum([
  // generated world
  "multihop",
  "arithmetic",
  "comparison",
  "computation",
  // real benchmarks
  "qa",
  "web_qa",
  "math",
  "code",
]);
export type TaskKind = z.infer<typeof TaskKind>;

/** One checkable question. `answers` holds every accepted gold answer. */
export const Task = z.object({
  id: z.string().min(1),
  question: z.string().min(1),
  answers: z.array(z.string()),
  kind: TaskKind,
  /** Where it came from: "world", "math500", "aime24", "nq", "webwalker", "livecodebench", a file name… */
  source: z.string(),
  meta: z.record(z.string(), z.unknown()).default({}),
});
export type Task = z.infer<typeof Task>;

/** A stdin/expected-output test case of a code task, kept in `meta.tests`. */
export const CodeTest = z.object({ input: z.string(), output: z.string() });
export type CodeTest = z.infer<typeof CodeTest>;
