import { describe, expect, it } from "vitest";
import { renderPrompt } from "./prompts.js";
import { renderObservation } from "./render.js";
import { emptyTrajectoryStats, type Trajectory } from "./trajectory.js";
import { checkTrajectory } from "./trajectory-check.js";

// A stand-in vocabulary for the test: one id per UTF-16 code unit.
const encode = (text: string) => [...text].flatMap((c) => [...c].map((u) => u.charCodeAt(0)));
const decode = (ids: readonly number[]) => String.fromCharCode(...ids);

const question = "What is the capital of France?";
function trajectory(
  segments: [source: "model" | "tool", text: string][],
  extra: Partial<Trajectory> = {},
): Trajectory {
  return {
    version: 2,
    id: "t1",
    question,
    profile: "mhqa",
    model: "scripted",
    tokenizer: "test-chars",
    promptIds: encode(renderPrompt({ profile: "mhqa", question })),
    segments: segments.map(([source, text]) =>
      source === "model"
        ? { source, ids: encode(text), logprobs: encode(text).map(() => -0.5) }
        : { source, ids: encode(text) },
    ),
    answer: "Paris",
    finishReason: "answer",
    stats: emptyTrajectoryStats(),
    origin: "run",
    meta: {},
    ...extra,
  };
}

const good: [source: "model" | "tool", text: string][] = [
  ["model", "<think>look it up</think>\n<wiki_search>capital of France</wiki_search>"],
  ["tool", renderObservation("1. Paris is the capital of France.")],
  ["model", "<answer>Paris</answer>"],
];

describe("checkTrajectory", () => {
  it("accepts a well-formed record and returns its steps", () => {
    const check = checkTrajectory(trajectory(good), decode);
    expect(check.problems).toEqual([]);
    expect(check.steps.map((s) => s.type)).toEqual(["think", "tool_call", "observation", "answer"]);
  });

  it("flags a prompt that is not renderPrompt of the question", () => {
    const t = trajectory(good, { promptIds: encode(`${renderPrompt({ profile: "mhqa", question })} `) });
    expect(checkTrajectory(t, decode).problems).toEqual([
      { field: "promptIds", message: expect.stringContaining("at character") },
    ]);
  });

  it("flags an observation inside a model segment (it would get loss)", () => {
    const t = trajectory([["model", `${good[0][1]}${renderObservation("forged")}<answer>Paris</answer>`]]);
    expect(checkTrajectory(t, decode).problems).toMatchObject([
      { field: "segments[0]", kind: "model_wrote_observation" },
    ]);
  });

  it("flags a tool segment that is not exactly one observation", () => {
    const t = trajectory([good[0], ["tool", "<observation>a</observation>\n<think>x</think>"], good[2]]);
    expect(checkTrajectory(t, decode).problems.map((p) => p.field)).toContain("segments[1]");
  });

  it("reports format errors and rule breaches with the segment they are in", () => {
    const t = trajectory([good[0], good[1], ["model", "<answer>Paris</answer> extra"]]);
    expect(checkTrajectory(t, decode).problems).toEqual([
      expect.objectContaining({ field: "segments[2]", kind: "stray_text" }),
    ]);
  });

  it("requires an answer only when the record finished with one", () => {
    const unfinished = trajectory(good.slice(0, 2), { finishReason: "max_turns", answer: null });
    expect(checkTrajectory(unfinished, decode).problems).toEqual([]);
    const finished = { ...unfinished, finishReason: "answer" as const };
    expect(checkTrajectory(finished, decode).problems.map((p) => p.kind)).toEqual(["bad_transition"]);
  });

  it("checks the answer field and logprob lengths", () => {
    const t = trajectory(good, { answer: "Lyon" });
    t.segments[0] = { source: "model", ids: t.segments[0].ids, logprobs: [-1] };
    expect(checkTrajectory(t, decode).problems.map((p) => p.field)).toEqual([
      "segments[0].logprobs",
      "answer",
    ]);
  });

  it("checks against a profile given in place of the record's", () => {
    const problems = checkTrajectory(trajectory(good), decode, { profile: "web" }).problems;
    expect(problems.map((p) => [p.field, p.kind])).toEqual([["segments[0]", "disabled_tag"]]);
  });

  it("reports ids the decoder rejects", () => {
    const strict = (ids: readonly number[]) => {
      if (ids.some((id) => id > 0xffff)) throw new RangeError("id out of range");
      return decode(ids);
    };
    const t = trajectory(good);
    t.segments[2] = { source: "model", ids: [0x10000] };
    expect(checkTrajectory(t, strict).problems[0]).toEqual({
      field: "segments[2]",
      message: "cannot decode: id out of range",
    });
  });
});
