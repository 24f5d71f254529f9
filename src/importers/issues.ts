/** Why part of an input file was not imported. The rest of the file is imported regardless. */
export type IssueReason =
  | "invalid_json" // a torn or truncated line
  | "not_a_record" // a line of another format (a mixed file)
  | "missing_parent" // a span whose parent is in no file: read as a top-level span
  | "unknown_span_type" // a span kind the importer does not know: skipped
  | "unknown_item_type" // a run item (openai-agents-run) of a kind the importer does not know: skipped
  | "tool_output_without_call" // a run's tool output whose call is in no earlier item: skipped
  | "unanswered_tool_call" // a run's tool call with no output (an interrupted run): left out
  | "no_task" // a trace that joins no task of --tasks by id or question: not written
  | "empty_trace"; // a trace with no model call

export interface ImportIssue {
  reason: IssueReason;
  file: string;
  /** 1-based line, or 0 for a whole file (OTLP/JSON, a run state: the detail names the run and item) or trace. */
  line: number;
  detail: string;
}

export const issueText = (i: ImportIssue): string =>
  `${i.file}${i.line ? `:${i.line}` : ""}: ${i.reason}: ${i.detail}`;

/** One trace in the generic form, with where its records came from (for messages about it). */
export interface Parsed<T> {
  trace: T;
  file: string;
  line: number;
}

/** A line as JSON; a line that is not (torn, truncated) is recorded as an issue and gives `undefined`. */
export function jsonLine(text: string, file: string, line: number, issues: ImportIssue[]): unknown {
  try {
    return JSON.parse(text);
  } catch {
    issues.push({ reason: "invalid_json", file, line, detail: "not JSON (a torn or truncated line?)" });
    return undefined;
  }
}
