import type { ProfileName, RoleTag } from "../protocol/index.js";
import { PROFILES } from "../protocol/index.js";
import type { AgentName, MessageKind } from "../teacher/index.js";

/** What a MAS message becomes in the CoA trajectory. */
export type Target = RoleTag | "tool_call" | "observation" | "skip";

export interface MappingRow {
  kind: MessageKind;
  /** The agents that may send this kind of message; any other sender makes the trace unmappable. */
  from: readonly AgentName[];
  to: Target;
  /** Used instead of `to` when the profile does not enable that role tag. */
  fallback?: RoleTag | "skip";
  why: string;
}

const WORKERS: readonly AgentName[] = ["manager", "searcher", "coder", "critic", "verifier"];

/**
 * The MAS → CoA mapping, one row per message kind. docs/distill.md shows the same table; the
 * converter only looks rows up, so changing the mapping means changing this data.
 */
export const MAPPING: readonly MappingRow[] = [
  { kind: "task", from: ["user"], to: "skip", why: "the question is already in the prompt" },
  { kind: "plan", from: ["manager"], to: "plan", fallback: "think", why: "the manager's plan or re-plan" },
  {
    kind: "delegate",
    from: ["manager"],
    to: "think",
    why: "the sub-task becomes the single agent's own intention",
  },
  { kind: "reasoning", from: WORKERS, to: "think", why: "any agent's thinking is the model's thinking" },
  {
    kind: "tool_call",
    from: WORKERS,
    to: "tool_call",
    why: "the delegated search or program, as a tool tag",
  },
  { kind: "observation", from: ["tool"], to: "observation", why: "the original tool result, verbatim" },
  {
    kind: "report",
    from: ["searcher", "coder"],
    to: "think",
    why: "what a sub-task found, restated as the model's own conclusion",
  },
  {
    kind: "reflection",
    from: ["critic", "manager"],
    to: "reflection",
    fallback: "think",
    why: "the critic's review of progress, conflicts and mistakes",
  },
  {
    kind: "proposal",
    from: ["manager"],
    to: "suggested_answer",
    fallback: "skip",
    why: "the candidate answer sent to the verifier",
  },
  {
    kind: "verdict",
    from: ["verifier"],
    to: "double_check",
    fallback: "think",
    why: "the verifier's reasons, ending with its 1-5 score",
  },
  { kind: "final", from: ["manager"], to: "answer", why: "the answer given to the user" },
];

/** The row for a message, or null when the table has none (the trace is then skipped). */
export function lookupRow(from: AgentName, kind: MessageKind): MappingRow | null {
  return MAPPING.find((row) => row.kind === kind && row.from.includes(from)) ?? null;
}

/** The row's target under a profile: its fallback when the profile lacks the role tag. */
export function targetFor(row: MappingRow, profile: ProfileName): Target {
  const roles: readonly string[] = PROFILES[profile].roles;
  if (row.to === "skip" || row.to === "tool_call" || row.to === "observation" || roles.includes(row.to))
    return row.to;
  return row.fallback ?? "skip";
}
