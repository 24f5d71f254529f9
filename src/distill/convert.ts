import { type ProfileName, parseScore, type Step } from "../protocol/index.js";
import type { MasMessage, MasTrace } from "../teacher/index.js";
import { lookupRow, targetFor } from "./table.js";

/** One CoA step and where it came from. */
export interface Piece {
  step: Step;
  /** `index` of the MAS message the step came from (the first one, for merged thinks). */
  message: number;
  /** Observations only: the tool's text exactly as the teacher recorded it (steps hold it trimmed). */
  raw?: string;
  /** Observations only: whether the tool call succeeded. */
  ok?: boolean;
}

export type ConvertFailure =
  | "unmapped_message"
  | "tool_call_without_tool"
  | "missing_observation"
  | "no_answer";

export type ConvertResult =
  | { ok: true; pieces: Piece[] }
  | { ok: false; reason: ConvertFailure; detail: string };

class Unconvertible extends Error {
  constructor(
    readonly reason: ConvertFailure,
    detail: string,
  ) {
    super(detail);
  }
}

/** The double check text: the verdict's reasons, ending with its score the way `parseScore` reads it. */
export function verdictText(msg: Pick<MasMessage, "content" | "score">): string {
  const text = msg.content.trim();
  if (msg.score === undefined || parseScore(text) === msg.score) return text;
  return `${text}\nScore: ${msg.score}`;
}

/**
 * Maps a MAS trace onto CoA steps through the MAPPING table (in message-index order). Consecutive
 * thinks merge into one; each tool call must be answered by the next mapped message, an observation;
 * an observation that answers no call (system feedback to the teacher) is left out.
 * Content is trimmed, as the parser trims it, so the steps survive a render/parse round trip.
 */
export function convertTrace(trace: MasTrace, profile: ProfileName): ConvertResult {
  try {
    return { ok: true, pieces: toPieces(trace, profile) };
  } catch (err) {
    if (err instanceof Unconvertible) return { ok: false, reason: err.reason, detail: err.message };
    throw err;
  }
}

function toPieces(trace: MasTrace, profile: ProfileName): Piece[] {
  const pieces: Piece[] = [];
  let openCall: MasMessage | null = null;
  const messages = [...trace.messages].sort((a, b) => a.index - b.index);
  for (const msg of messages) {
    const where = `message ${msg.index} (${msg.from} ${msg.kind})`;
    const row = lookupRow(msg.from, msg.kind);
    if (!row) throw new Unconvertible("unmapped_message", `${where}: no mapping for this sender and kind`);
    const target = targetFor(row, profile);
    if (openCall && target !== "observation")
      throw new Unconvertible(
        "missing_observation",
        `message ${openCall.index}: tool call has no observation`,
      );
    // A verdict keeps its score in the text whichever tag it lands in.
    const text = msg.kind === "verdict" ? verdictText(msg) : msg.content.trim();
    switch (target) {
      case "skip":
        break;
      case "tool_call": {
        if (!msg.tool)
          throw new Unconvertible("tool_call_without_tool", `${where}: no tool name and arguments`);
        const step: Step = { type: "tool_call", tool: msg.tool.name, args: msg.tool.args.trim() };
        pieces.push({ step, message: msg.index });
        openCall = msg;
        break;
      }
      case "observation":
        // No call to answer: the teacher system's own feedback (a malformed reply, a spent budget).
        // The reply it answers is not in the trace, so neither is the feedback.
        if (!openCall) break;
        pieces.push({
          step: { type: "observation", text },
          message: msg.index,
          raw: msg.content,
          ok: msg.ok,
        });
        openCall = null;
        break;
      case "think": {
        const last = pieces.at(-1);
        if (!text) break;
        if (last?.step.type === "think") last.step.text = `${last.step.text}\n${text}`;
        else pieces.push({ step: { type: "think", text }, message: msg.index });
        break;
      }
      case "double_check": {
        const checked = verdictText(msg);
        pieces.push({
          step: { type: "double_check", text: checked, score: parseScore(checked) },
          message: msg.index,
        });
        break;
      }
      default:
        pieces.push({ step: { type: target, text }, message: msg.index });
    }
  }
  if (openCall)
    throw new Unconvertible("missing_observation", `message ${openCall.index}: tool call has no observation`);
  if (!pieces.some((p) => p.step.type === "answer"))
    throw new Unconvertible("no_answer", "the trace has no final answer message");
  return pieces;
}
