import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { type Step, validateTrajectorySteps } from "../protocol/index.js";
import { AgentName, MessageKind } from "../teacher/index.js";
import { convertTrace, type Piece, verdictText } from "./convert.js";
import { lookupRow, MAPPING, targetFor } from "./table.js";
import { conversation, fullTrace, shortTrace, traceOf } from "./testing/fixtures.js";

const stepsOf = (pieces: Piece[]): Step[] => pieces.map((p) => p.step);
const converted = (r: ReturnType<typeof convertTrace>): Piece[] => {
  if (!r.ok) throw new Error(`${r.reason}: ${r.detail}`);
  return r.pieces;
};

describe("MAPPING table", () => {
  it("has exactly one row for every message kind, and every row's senders are known agents", () => {
    expect(MAPPING.map((r) => r.kind).sort()).toEqual([...MessageKind.options].sort());
    for (const row of MAPPING) for (const from of row.from) expect(AgentName.options).toContain(from);
  });

  it("is the table docs/distill.md shows", () => {
    const doc = readFileSync(new URL("../../docs/distill.md", import.meta.url), "utf8");
    const rows = doc
      .split("\n")
      .filter((l) => l.startsWith("| "))
      .map((l) =>
        l
          .slice(1, -1)
          .split("|")
          .map((c) => c.trim()),
      );
    for (const row of MAPPING)
      expect(rows).toContainEqual([row.kind, row.from.join(", "), row.to, row.fallback ?? "", row.why]);
  });

  it("falls back when the profile lacks the role tag", () => {
    const reflection = lookupRow("critic", "reflection")!;
    expect(targetFor(reflection, "web")).toBe("reflection");
    expect(targetFor(reflection, "mhqa")).toBe("think");
    expect(targetFor(lookupRow("manager", "proposal")!, "code")).toBe("skip");
    expect(lookupRow("user", "plan")).toBeNull();
  });
});

describe("convertTrace", () => {
  it("maps every message kind of a full trace onto CoA steps, in order", () => {
    const steps = stepsOf(converted(convertTrace(fullTrace(), "all")));
    expect(steps.map((s) => (s.type === "tool_call" ? s.tool : s.type))).toEqual([
      "plan",
      "think", // delegate + searcher reasoning, merged
      "web_search",
      "observation",
      "think", // report + next delegate, merged
      "code",
      "observation",
      "reflection",
      "code",
      "observation",
      "think", // coder's report
      "suggested_answer",
      "double_check",
      "plan",
      "web_search",
      "observation",
      "think",
      "reflection",
      "suggested_answer",
      "double_check",
      "answer",
    ]);
    expect(steps[1]).toEqual({
      type: "think",
      text: "Find the founder of Acme Robotics.\nA search for the company should name its founder.",
    });
    expect(steps[2]).toEqual({ type: "tool_call", tool: "web_search", args: "Acme Robotics founder" });
    expect(validateTrajectorySteps(steps, "all")).toEqual([]);
  });

  it("keeps observations verbatim beside their trimmed step text, with the tool's success flag", () => {
    const pieces = converted(convertTrace(fullTrace(), "all"));
    const first = pieces.find((p) => p.step.type === "observation")!;
    expect(first.raw).toBe("1. Acme Robotics — https://w/acme\n   Founded in 1999 by Mara Quist.\n");
    expect(first.step).toEqual({ type: "observation", text: first.raw!.trim() });
    expect(pieces.filter((p) => p.step.type === "observation").map((p) => p.ok)).toEqual([
      true,
      false,
      true,
      true,
    ]);
  });

  it("turns a verdict into a double check that ends with its score", () => {
    const steps = stepsOf(converted(convertTrace(fullTrace(), "all")));
    const checks = steps.filter((s) => s.type === "double_check");
    expect(checks).toEqual([
      { type: "double_check", text: "No source says Mara Quist was born in Paris.\nScore: 2", score: 2 },
      { type: "double_check", text: "The page states Lyon. Score: 5", score: 5 },
    ]);
    expect(verdictText({ content: "Looks right. Score: 4", score: 3 })).toBe(
      "Looks right. Score: 4\nScore: 3",
    );
  });

  it("applies the table's fallbacks under a profile without verifying roles", () => {
    const trace = traceOf(
      conversation(
        ["user", "manager", "task", "q"],
        ["manager", "searcher", "plan", "look it up"],
        ["searcher", "tool", "tool_call", "", { tool: { name: "wiki_search", args: "q" } }],
        ["tool", "searcher", "observation", "a result", { ok: true }],
        ["critic", "manager", "reflection", "fine so far"],
        ["manager", "verifier", "proposal", "A"],
        ["verifier", "manager", "verdict", "Supported.", { score: 4 }],
        ["manager", "user", "final", "A"],
      ),
    );
    const steps = stepsOf(converted(convertTrace(trace, "mhqa")));
    expect(steps.map((s) => s.type)).toEqual(["plan", "tool_call", "observation", "think", "answer"]);
    expect(steps[3]).toEqual({ type: "think", text: "fine so far\nSupported.\nScore: 4" });
    expect(validateTrajectorySteps(steps, "mhqa")).toEqual([]);
  });

  it.each([
    [
      "unmapped_message",
      conversation(
        ["user", "manager", "task", "q"],
        ["user", "manager", "plan", "p"],
        ["manager", "user", "final", "A"],
      ),
    ],
    [
      "tool_call_without_tool",
      conversation(
        ["manager", "user", "plan", "p"],
        ["searcher", "tool", "tool_call", "x"],
        ["manager", "user", "final", "A"],
      ),
    ],
    [
      "missing_observation",
      conversation(
        ["manager", "user", "plan", "p"],
        ["searcher", "tool", "tool_call", "", { tool: { name: "web_search", args: "q" } }],
        ["searcher", "manager", "report", "nothing came back"],
        ["manager", "user", "final", "A"],
      ),
    ],
    [
      "missing_observation",
      conversation(
        ["manager", "user", "plan", "p"],
        ["manager", "user", "final", "A"],
        ["searcher", "tool", "tool_call", "", { tool: { name: "web_search", args: "q" } }],
      ),
    ],
    ["no_answer", conversation(["manager", "user", "plan", "p"], ["searcher", "manager", "report", "r"])],
  ])("rejects a trace with %s, naming the message", (reason, messages) => {
    const result = convertTrace(traceOf(messages), "all");
    expect(result.ok).toBe(false);
    if (!result.ok) {
      expect(result.reason).toBe(reason);
      expect(result.detail.length).toBeGreaterThan(0);
    }
  });

  it("leaves out feedback the teacher system gave itself (an observation answering no tool call)", () => {
    const trace = traceOf(
      conversation(
        ["user", "manager", "task", "q"],
        ["manager", "manager", "plan", "p"],
        ["tool", "manager", "observation", "Format error: end with one line SEARCH: …", { ok: false }],
        ["manager", "manager", "reasoning", "Search first."],
        ["manager", "user", "final", "A"],
      ),
    );
    expect(stepsOf(converted(convertTrace(trace, "all"))).map((s) => s.type)).toEqual([
      "plan",
      "think",
      "answer",
    ]);
  });

  it("orders messages by index, not by position in the file", () => {
    const trace = shortTrace();
    const shuffled = { ...trace, messages: [...trace.messages].reverse() };
    expect(convertTrace(shuffled, "all")).toEqual(convertTrace(trace, "all"));
  });
});
