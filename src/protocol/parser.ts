import { answerProblem, type DialectName, dialectOf, profileIn } from "./dialects.js";
import { parseScore } from "./score.js";
import type { FormatError, FormatErrorKind, Step } from "./steps.js";
import {
  ALL_TAGS,
  closeTag,
  OBSERVATION_TAG,
  type ProfileName,
  type RoleTag,
  type Tag,
  TOOL_TAGS,
  type ToolTag,
} from "./tags.js";
import { extractCode } from "./tool-args.js";

export interface ParseOptions {
  /** Report tags this profile does not enable (`disabled_tag`). Without it every protocol tag is allowed. */
  profile?: ProfileName;
  /** The text is model output, so an `<observation>` in it was forged by the model. */
  modelOutput?: boolean;
  /** Whose rules the text follows (default `coa`): the score scale, the answer form, and with `profile` the roles. */
  dialect?: DialectName;
}

export interface ParseResult {
  steps: Step[];
  errors: FormatError[];
}

/**
 * Longest name that tag-shaped text may have: twice the longest protocol tag. The cap keeps parsing
 * linear: a streamed `<` followed by endless letters is decided (as text) after a bounded lookahead
 * instead of being held back and rescanned on every chunk.
 */
export const MAX_TAG_NAME = 2 * Math.max(...ALL_TAGS.map((t) => t.length));
/** Anything shaped like an XML tag. Only these can open or close elements or be reported as tags. */
const TAG_SHAPE = new RegExp(`<(\\/?)([a-z][a-z0-9_]{0,${MAX_TAG_NAME - 1}})>`, "g");
/** A buffer tail that could still grow into a tag once the next chunk arrives (at most `</` + a name). */
const TAG_PREFIX = new RegExp(`^<\\/?(?:[a-z][a-z0-9_]{0,${MAX_TAG_NAME - 1}})?$`);
const MAX_TAG_PREFIX = MAX_TAG_NAME + 2;

const KNOWN_TAGS: ReadonlySet<string> = new Set(ALL_TAGS);
/** Elements whose content is opaque: only their own closing tag ends them (code may hold `a<b>c`). */
const RAW_TAGS: ReadonlySet<Tag> = new Set<Tag>([...TOOL_TAGS, OBSERVATION_TAG]);
const TOOL_TAG_SET: ReadonlySet<Tag> = new Set<Tag>(TOOL_TAGS);

interface OpenElement {
  tag: Tag;
  /** Offset of the `<` of the opening tag. */
  start: number;
  parts: string[];
  /**
   * How many of each protocol tag are open inside a role element (their text stays in `parts`). Only
   * the counts matter, so closing one is O(1) rather than a search through a list.
   */
  nested: Map<Tag, number>;
}

/**
 * Incremental Chain-of-Agents parser: push text chunks as they are generated, call `end()` once.
 * Chunks may split a tag anywhere; the result equals `parseCoa` on the joined text. Never throws:
 * malformed text becomes FormatErrors with half-open character spans into the whole input.
 */
export class CoaStreamParser {
  private buf = "";
  /** Absolute offset of `buf[0]`: everything before it has been consumed. */
  private base = 0;
  private open: OpenElement | null = null;
  /** Extent of non-whitespace text seen between elements since the last tag, or -1. */
  private strayStart = -1;
  private strayEnd = -1;
  private readonly done: Step[] = [];
  private readonly problems: FormatError[] = [];
  private result: ParseResult | null = null;
  private readonly enabled: ReadonlySet<Tag> | null;
  private readonly modelOutput: boolean;
  private readonly dialect: DialectName;
  private readonly maxScore: number;

  constructor(opts: ParseOptions = {}) {
    this.dialect = opts.dialect ?? "coa";
    this.maxScore = dialectOf(this.dialect).score.max;
    const profile = opts.profile ? profileIn(opts.profile, this.dialect) : null;
    this.enabled = profile ? new Set<Tag>([...profile.roles, ...profile.tools, OBSERVATION_TAG]) : null;
    this.modelOutput = opts.modelOutput ?? false;
  }

  /** Steps completed so far (an element counts once its closing tag has arrived). */
  get steps(): Step[] {
    return this.done;
  }

  /** Errors found so far, in the order found; `end()` sorts them by position. */
  get errors(): FormatError[] {
    return this.problems;
  }

  /** Characters pushed so far. */
  get length(): number {
    return this.base + this.buf.length;
  }

  push(chunk: string): void {
    if (this.result || chunk.length === 0) return;
    this.buf += chunk;
    this.scan(false);
  }

  /** Finishes the input (reporting unclosed elements and trailing stray text); idempotent. */
  end(): ParseResult {
    if (this.result) return this.result;
    this.scan(true);
    this.flushStray();
    if (this.open) {
      this.report("unclosed_tag", `<${this.open.tag}> is never closed`, this.open.start, this.length);
      this.open = null;
    }
    // Stable sort: errors at one position keep the order they were found in.
    this.problems.sort((a, b) => a.span.start - b.span.start);
    this.result = { steps: this.done, errors: this.problems };
    return this.result;
  }

  private scan(final: boolean): void {
    const buf = this.buf;
    let i = 0;
    while (i < buf.length) {
      const open = this.open;
      if (open && RAW_TAGS.has(open.tag)) {
        const close = closeTag(open.tag);
        const at = buf.indexOf(close, i);
        if (at < 0) {
          // Keep a tail that may be the start of the closing tag.
          const keep = final ? buf.length : Math.max(i, buf.length - close.length + 1);
          open.parts.push(buf.slice(i, keep));
          i = keep;
          break;
        }
        open.parts.push(buf.slice(i, at));
        i = at + close.length;
        this.closeElement(open, this.base + i);
        continue;
      }
      TAG_SHAPE.lastIndex = i;
      const m = TAG_SHAPE.exec(buf);
      if (!m) {
        let stop = buf.length;
        if (!final) {
          const lt = buf.lastIndexOf("<");
          if (lt >= i && buf.length - lt <= MAX_TAG_PREFIX && TAG_PREFIX.test(buf.slice(lt))) stop = lt;
        }
        this.text(buf, i, stop);
        i = stop;
        break;
      }
      this.text(buf, i, m.index);
      i = m.index + m[0].length;
      this.tag(m[1] === "/", m[2], m[0], this.base + m.index, this.base + i);
    }
    this.buf = buf.slice(i);
    this.base += i;
  }

  /** Text between tags: content of an open role element, or stray text at top level. */
  private text(buf: string, from: number, to: number): void {
    if (from >= to) return;
    if (this.open) {
      this.open.parts.push(buf.slice(from, to));
      return;
    }
    // Same notion of whitespace as the String.trim that cleans step text.
    const gap = buf.slice(from, to);
    const first = gap.search(/\S/);
    if (first < 0) return;
    if (this.strayStart < 0) this.strayStart = this.base + from + first;
    this.strayEnd = this.base + from + gap.trimEnd().length;
  }

  private tag(isClose: boolean, name: string, raw: string, start: number, end: number): void {
    const tag = KNOWN_TAGS.has(name) ? (name as Tag) : null;
    const open = this.open;
    if (open) {
      if (isClose && tag === open.tag) {
        this.closeElement(open, end);
        return;
      }
      // Inside a role element every other tag is text of that element, and a mistake.
      open.parts.push(raw);
      if (!tag) this.report("unknown_tag", `${raw} is not a protocol tag`, start, end);
      else if (!isClose) {
        open.nested.set(tag, (open.nested.get(tag) ?? 0) + 1);
        this.report("nested_tag", `${raw} opened inside <${open.tag}>`, start, end);
      } else {
        const n = open.nested.get(tag) ?? 0;
        if (n > 0) open.nested.set(tag, n - 1);
        else this.report("unexpected_close", `${raw} closes nothing inside <${open.tag}>`, start, end);
      }
      return;
    }
    this.flushStray();
    if (!tag) this.report("unknown_tag", `${raw} is not a protocol tag`, start, end);
    else if (isClose) this.report("unexpected_close", `${raw} closes nothing`, start, end);
    else {
      this.open = { tag, start, parts: [], nested: new Map() };
      if (tag === OBSERVATION_TAG && this.modelOutput)
        this.report(
          "model_wrote_observation",
          "<observation> is written by the system after a tool call, never by the model",
          start,
          end,
        );
      else if (this.enabled && !this.enabled.has(tag))
        this.report("disabled_tag", `${raw} is not enabled in this profile`, start, end);
    }
  }

  private closeElement(open: OpenElement, end: number): void {
    this.open = null;
    const text = open.parts.join("").trim();
    const span = { start: open.start, end };
    const step = makeStep(open.tag, text, span, this.maxScore);
    this.done.push(step);
    const badAnswer = step.type === "answer" && text !== "" ? answerProblem(text, this.dialect) : null;
    if (text === "") this.report("empty_tag", `<${open.tag}> is empty`, span.start, span.end);
    else if (open.tag === "code" && !extractCode(text))
      this.report("missing_code_fence", "<code> needs a ```python fenced block", span.start, span.end);
    else if (step.type === "double_check" && step.score === null)
      this.report(
        "bad_score",
        `<double_check> must end with a score from 1 to ${this.maxScore}`,
        span.start,
        span.end,
      );
    else if (badAnswer) this.report("bad_answer", badAnswer, span.start, span.end);
  }

  private flushStray(): void {
    if (this.strayStart < 0) return;
    this.report("stray_text", "text outside any tag", this.strayStart, this.strayEnd);
    this.strayStart = -1;
    this.strayEnd = -1;
  }

  private report(kind: FormatErrorKind, message: string, start: number, end: number): void {
    this.problems.push({ kind, message, span: { start, end } });
  }
}

function makeStep(tag: Tag, text: string, span: { start: number; end: number }, maxScore: number): Step {
  if (TOOL_TAG_SET.has(tag)) return { type: "tool_call", tool: tag as ToolTag, args: text, span };
  if (tag === "double_check") return { type: "double_check", text, score: parseScore(text, maxScore), span };
  return { type: tag as Exclude<RoleTag, "double_check"> | typeof OBSERVATION_TAG, text, span };
}

/** Parses a whole text at once; see CoaStreamParser. */
export function parseCoa(text: string, opts?: ParseOptions): ParseResult {
  const parser = new CoaStreamParser(opts);
  parser.push(text);
  return parser.end();
}
