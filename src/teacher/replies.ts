import { TOOL_TAGS, type ToolTag } from "../protocol/index.js";

export type ManagerAction = { kind: "search" | "code" | "answer"; text: string };

/** A manager's move: an optional sentence of reasoning, then one SEARCH:/CODE:/ANSWER: line. */
export function parseManagerReply(text: string): { thought: string; action: ManagerAction | null } {
  // The directive's text is the rest of its line, or the next line when a model breaks after the colon.
  const m = /^[ \t*]*(SEARCH|CODE|ANSWER)\s*:[ \t*]*(.*)(?:\n\s*(.*))?/im.exec(text);
  const body = (m?.[2].trim() || m?.[3]?.trim()) ?? "";
  if (!m || !body) return { thought: text.trim(), action: null };
  const kind = m[1].toLowerCase() as ManagerAction["kind"];
  return {
    thought: text.slice(0, m.index).trim(),
    action: { kind, text: kind === "answer" ? cleanAnswer(body) : body },
  };
}

/** An answer is a name, word or number: first line, no wrapping quotes, markup or final period. */
export function cleanAnswer(text: string): string {
  return text
    .split("\n")[0]
    .replace(/^[\s*"'`]+|[\s*"'`.]+$/g, "")
    .trim();
}

export type WorkerMove =
  | { kind: "tool"; thought: string; tool: ToolTag; args: string }
  | { kind: "report"; thought: string; text: string }
  | { kind: "malformed"; thought: string; problem: string };

const TOOL_OPEN = new RegExp(`<(${TOOL_TAGS.join("|")})>`);

/**
 * A worker's move: one tool call in protocol syntax, or `REPORT: …`. Anything else is malformed, and
 * the problem is said in words the worker can act on (it comes back as an observation).
 */
export function parseWorkerReply(text: string, allowed: readonly ToolTag[]): WorkerMove {
  const open = TOOL_OPEN.exec(text);
  if (open) {
    const tool = open[1] as ToolTag;
    const thought = text.slice(0, open.index).trim();
    const close = text.indexOf(`</${tool}>`, open.index);
    if (close < 0) return { kind: "malformed", thought, problem: `the <${tool}> tag is never closed` };
    if (!allowed.includes(tool)) {
      return {
        kind: "malformed",
        thought,
        problem: `<${tool}> is not yours to use; use ${allowed.map((t) => `<${t}>`).join(" or ")}`,
      };
    }
    return { kind: "tool", thought, tool, args: text.slice(open.index + open[0].length, close).trim() };
  }
  const report = /^[ \t*]*REPORT\s*:\s*([\s\S]+)/im.exec(text);
  if (report) return { kind: "report", thought: text.slice(0, report.index).trim(), text: report[1].trim() };
  return {
    kind: "malformed",
    thought: text.trim(),
    problem: `no tool call and no REPORT line; use ${allowed.map((t) => `<${t}>…</${t}>`).join(" or ")}, or REPORT: <result>`,
  };
}

/** The critic says NO_ISSUES when it has nothing to flag. */
export function isNoIssues(text: string): boolean {
  return /^\W*no[_ ]issues?\b/i.test(text.trim());
}
