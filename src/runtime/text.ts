import { z } from "zod";
import { appendAll, type Tokenizer } from "../model/index.js";
import { completionIds, parseCoa, type ToolTag, type Trajectory } from "../protocol/index.js";

/** The text views of a record, derived from its ids (never the reverse). */
export function trajectoryText(
  trajectory: Pick<Trajectory, "promptIds" | "segments">,
  tokenizer: Pick<Tokenizer, "decode">,
): { prompt: string; completion: string } {
  return {
    prompt: tokenizer.decode(trajectory.promptIds),
    completion: tokenizer.decode(completionIds(trajectory)),
  };
}

/** The part of `meta.runtime.calls` (one CallRecord per model call, so per model segment) read back here. */
const CallActions = z.array(z.object({ action: z.string() }));

/**
 * The tool calls the runtime ran, in order, read back from a record: each turn's model segments are
 * decoded together and parsed as the runtime parsed them, and a turn whose call record says `tool`
 * ran its last step. Turns fed back for format errors are not calls. A record without `meta.runtime.calls`
 * (not from runAgent) counts every turn an observation follows. Stops after `limit` calls, since
 * each costs a decode.
 */
export async function ranToolCalls(
  trajectory: Pick<Trajectory, "segments" | "meta">,
  decode: (ids: number[]) => string | Promise<string>,
  limit = Number.POSITIVE_INFINITY,
): Promise<{ tool: ToolTag; args: string }[]> {
  const records = CallActions.safeParse(trajectory.meta.runtime?.calls);
  const segments = trajectory.segments;
  const out: { tool: ToolTag; args: string }[] = [];
  let turn: number[] = [];
  let call = 0;
  for (let i = 0; i < segments.length && out.length < limit; i++) {
    const segment = segments[i]!;
    if (segment.source !== "model") continue;
    appendAll(turn, segment.ids);
    const next = segments[i + 1]?.source;
    const action = records.success
      ? records.data[call]?.action
      : next === "model"
        ? "continue"
        : next === "tool"
          ? "tool"
          : undefined;
    call++;
    if (action === "continue") continue;
    if (action === "tool") {
      const last = parseCoa(await decode(turn), { modelOutput: true }).steps.at(-1);
      if (last?.type === "tool_call") out.push({ tool: last.tool, args: last.args });
    }
    turn = [];
  }
  return out;
}
