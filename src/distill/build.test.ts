import { describe, expect, it } from "vitest";
import { z } from "zod";
import { ByteTokenizer } from "../model/index.js";
import { ScriptedModel } from "../model/testing/index.js";
import {
  checkFormat,
  checkTrajectory,
  completionIds,
  lossMask,
  parseCoa,
  renderObservation,
  renderPrompt,
  type ToolTag,
  Trajectory,
} from "../protocol/index.js";
import { runAgent } from "../runtime/index.js";
import type { Observation, Tool } from "../tools/index.js";
import { buildTrajectory, segmentTexts } from "./build.js";
import { convertTrace, type Piece } from "./convert.js";
import { fullTrace } from "./testing/fixtures.js";

const tok = new ByteTokenizer();
const trace = fullTrace();
const converted = convertTrace(trace, "all");
if (!converted.ok) throw new Error(converted.detail);
const pieces: Piece[] = converted.pieces;
const trajectory = buildTrajectory(trace, pieces, { tokenizer: tok, profile: "all", id: "t1@fixture:1" });

describe("buildTrajectory", () => {
  it("is a valid Trajectory record whose prompt ids are renderPrompt's text", () => {
    expect(Trajectory.parse(trajectory)).toEqual(trajectory);
    expect(tok.decode(trajectory.promptIds)).toBe(renderPrompt({ profile: "all", question: trace.question }));
    expect(trajectory.answer).toBe("Lyon");
    expect(trajectory.reward).toBe(1);
    expect(trajectory.segments.every((s) => s.source === "tool" || s.logprobs === undefined)).toBe(true);
  });

  it("puts each original observation, wrapped as the runtime wraps it, in its own tool segment", () => {
    const tools = trajectory.segments.filter((s) => s.source === "tool").map((s) => tok.decode(s.ids));
    const raws = pieces.filter((p) => p.step.type === "observation").map((p) => renderObservation(p.raw!));
    expect(tools).toEqual(raws);
    expect(trajectory.segments.map((s) => s.source)).toEqual([
      "model",
      "tool",
      "model",
      "tool",
      "model",
      "tool",
      "model",
      "tool",
      "model",
    ]);
  });

  it("never puts a tool token at a loss-mask 1 position, and masks exactly the observation spans", () => {
    const ids = completionIds(trajectory);
    const mask = lossMask(trajectory);
    const text = tok.decode(ids);
    // Character ranges of the tool segments in the completion text.
    const toolRanges: [number, number][] = [];
    let at = 0;
    for (const seg of trajectory.segments) {
      const len = tok.decode(seg.ids).length;
      if (seg.source === "tool") toolRanges.push([at, at + len]);
      at += len;
    }
    const observations = parseCoa(text).steps.filter((s) => s.type === "observation");
    expect(observations).toHaveLength(toolRanges.length);
    observations.forEach((obs, i) => {
      const [start, end] = toolRanges[i]!;
      expect(obs.span!.start).toBeGreaterThanOrEqual(start);
      expect(obs.span!.end).toBeLessThanOrEqual(end);
      // Outside the <observation> element, a tool segment holds only the separators.
      expect(text.slice(start, obs.span!.start) + text.slice(obs.span!.end, end)).toMatch(/^\s*$/);
    });
    const trained = tok.decode(ids.filter((_, i) => mask[i] === 1));
    expect(trained).not.toContain("<observation>");
    expect(trained).not.toContain("Founded in 1999");
    expect(mask.filter((m) => m === 0)).toHaveLength(trajectory.stats.toolTokens);
  });

  it("reads back as the converted steps and passes the protocol's record check", () => {
    expect(checkTrajectory(trajectory, (ids) => tok.decode(ids)).problems).toEqual([]);
    const text = tok.decode(completionIds(trajectory));
    const check = checkFormat(text, "all");
    expect(check.errors).toEqual([]);
    expect(check.steps.map(({ span, ...s }) => s)).toEqual(pieces.map((p) => p.step));
    expect(
      segmentTexts(pieces)
        .map((s) => s.text)
        .join(""),
    ).toBe(text);
  });

  it("counts what the runtime counts", () => {
    const s = trajectory.stats;
    expect(s.toolCalls).toEqual({ web_search: 2, code: 2 });
    expect(s.duplicateCalls).toBe(0);
    expect(s.turns).toBe(5);
    expect(s.modelCalls).toBe(5);
    expect(s.promptTokens).toBe(trajectory.promptIds.length);
    expect(s.modelTokens + s.toolTokens).toBe(completionIds(trajectory).length);
    expect(s.toolMs).toBe(40 + 30 + 30 + 10);
  });
});

/** A tool that answers with the teacher's recorded observations, in order: the runtime replays the trace. */
function replayTool(tag: ToolTag, results: Observation[]): Tool<string> {
  return {
    tag,
    description: `replays recorded ${tag} results`,
    argsSchema: z.string(),
    parseArgs: (raw) => raw,
    run: async () => results.shift()!,
  };
}

describe("distilled record vs the runtime", () => {
  it("has the ids the runtime records when a model writes the teacher's text and tools return its observations", async () => {
    const model = new ScriptedModel(
      segmentTexts(pieces)
        .filter((s) => s.source === "model")
        .map((s) => s.text),
    );
    const recorded = (tool: ToolTag) =>
      pieces.flatMap((p, i) => {
        const call = pieces[i - 1]?.step;
        if (p.step.type !== "observation" || call?.type !== "tool_call" || call.tool !== tool) return [];
        return [{ text: p.raw!, ok: p.ok ?? true, truncated: false, elapsedMs: 0 }];
      });
    const run = await runAgent({
      model,
      tools: new Map([
        ["web_search", replayTool("web_search", recorded("web_search"))],
        ["code", replayTool("code", recorded("code"))],
      ]),
      profile: "all",
      question: trace.question,
    });
    expect(run.finishReason).toBe("answer");
    expect(run.promptIds).toEqual(trajectory.promptIds);
    expect(run.segments.map((s) => ({ source: s.source, ids: s.ids }))).toEqual(trajectory.segments);
    expect(run.stats.contextTokens).toBe(trajectory.stats.contextTokens);
    expect(run.stats.toolCalls).toEqual(trajectory.stats.toolCalls);
  });
});
