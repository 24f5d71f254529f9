import type { Handler } from "hono";
import { z } from "zod";
import { parseCoa } from "../protocol/index.js";
import { Task, TaskLoadError, verlRowToTask } from "../tasks/index.js";
import type { ToolBackend } from "./backend.js";
import { withinDeadline } from "./deadline.js";
import { ApiError, readBody } from "./errors.js";

/** verl ground truths: a string, a number, a list, or Search-R1's `{target: [...]}`. */
const GroundTruth = z.union([
  z.string(),
  z.number(),
  z.array(z.string()),
  z.strictObject({ target: z.union([z.string(), z.array(z.string())]) }).transform((t) => t.target),
]);

/**
 * What to score against, and what to score. The target is a coa task, or a verl row's `data_source` and
 * `ground_truth` (with its `extra_info` and, when known, `ability`), mapped to a task the way coa reads
 * verl parquet. The prediction is the final `answer`, or a whole CoA response (`solution_str`, what
 * verl's reward function receives) whose last `<answer>` is taken.
 */
export const ScoreRequest = z
  .strictObject({
    task: Task.optional(),
    data_source: z.string().min(1).optional(),
    ground_truth: GroundTruth.optional(),
    extra_info: z.record(z.string(), z.unknown()).nullish(),
    ability: z.string().nullish(),
    answer: z.string().nullable().optional(),
    solution_str: z.string().optional(),
  })
  .refine((r) => (r.task === undefined) !== (r.data_source === undefined && r.ground_truth === undefined), {
    message: "give either task, or data_source and ground_truth",
  })
  .refine((r) => r.task !== undefined || (r.data_source !== undefined && r.ground_truth !== undefined), {
    message: "data_source and ground_truth go together",
  })
  .refine((r) => (r.answer === undefined) !== (r.solution_str === undefined), {
    message: "give either answer or solution_str",
  });
type ScoreRequest = z.infer<typeof ScoreRequest>;

/** verl's reward function is not given the question; the scorers that need one (the judge) are not used here. */
const NO_QUESTION = "(question not given)";

function taskOf(req: ScoreRequest): Task {
  if (req.task) return req.task;
  const extra = req.extra_info ?? {};
  const question = typeof extra.question === "string" && extra.question ? extra.question : NO_QUESTION;
  try {
    return verlRowToTask(
      {
        data_source: req.data_source,
        prompt: [{ role: "user", content: question }],
        ability: req.ability,
        reward_model: { ground_truth: req.ground_truth },
        extra_info: extra,
      },
      { file: "POST /score", unit: "row", n: 0 },
    );
  } catch (err) {
    if (err instanceof TaskLoadError) throw new ApiError(400, "invalid_request_error", err.message);
    throw err;
  }
}

/** The final answer of a CoA response: its last `<answer>` step, or none. */
function answerOf(req: ScoreRequest): string | null {
  if (req.solution_str === undefined) return req.answer ?? null;
  const answer = parseCoa(req.solution_str).steps.findLast((s) => s.type === "answer");
  return answer?.type === "answer" ? answer.text : null;
}

/** `POST /score` → coa's Score: `{score, correct, error, scorer, metrics?}`; `error` set when the scorer could not decide. */
export const scoreHandler =
  (backend: ToolBackend, opts: { timeoutMs: number }): Handler =>
  async (c) => {
    const req = await readBody(c, ScoreRequest);
    const task = taskOf(req);
    const score = await withinDeadline(c, opts.timeoutMs, (signal) =>
      backend.score(task, answerOf(req), signal),
    );
    return c.json(score);
  };
