import { randomUUID } from "node:crypto";
import { appendAll, type CompletionChoice, type CompletionRequest, clipServerText } from "../model/index.js";
import {
  answerOf,
  emptyTrajectoryStats,
  type FinishReason,
  type FormatError,
  parseCoa,
  promptMessages,
  renderObservation,
  renderPrompt,
  type Segment,
  type Step,
  stopSequences,
  TRAJECTORY_VERSION,
  type Trajectory,
  type TrajectoryStats,
  validateTrajectorySteps,
} from "../protocol/index.js";
import { ToolCaller, type ToolCallOutcome } from "../tools/index.js";
import { formatFeedback, NO_ACTION_MESSAGE } from "./feedback.js";
import type { RunTrajectory, RuntimeMeta } from "./meta.js";
import {
  type Budget,
  type CallRecord,
  DEFAULT_BUDGET,
  DEFAULT_SAMPLING,
  type RunEvent,
  type RunOptions,
  type Sampling,
} from "./types.js";

/** What a model call came to: the choice to act on, or the episode's end. */
type CallOutcome =
  | { type: "called"; choice: CompletionChoice }
  | { type: "ended"; trajectory: RunTrajectory };

const DEFAULT_TOOL_TIMEOUT_MS = 60_000;
const DEFAULT_MAX_OBSERVATION_CHARS = 3_000;

/**
 * Runs one Chain-of-Agents episode: generate until a stop sequence, parse, run the tool, append its
 * observation, repeat until `<answer>` or a budget ends it. Returns the token-exact record: the
 * prompt ids, then model and tool segments exactly as produced, never re-tokenized.
 *
 * The prompt is tokenized once; every model call continues from the ids recorded so far. A call
 * that stops for length is continued by the next call; a turn is parsed when a call stops (or when
 * a budget ends the episode mid-turn: then it counts as a `truncated_turn` format error). A turn
 * with format errors is not acted on: the errors go back to the model as an observation.
 * Tool failures are observations too; only model errors (finish "model_error") and a caller's abort
 * (which rejects) end an episode early.
 */
export function runAgent(opts: RunOptions): Promise<RunTrajectory> {
  return new Episode(opts).run();
}

class Episode {
  private readonly budget: Budget;
  private readonly sampling: Sampling;
  private readonly stops: string[];
  private readonly tools: ToolCaller;
  private readonly emit: (event: RunEvent) => void;
  private readonly started: number;
  private readonly deadline: number;
  /**
   * Fires at the deadline (or with the caller's abort): every model call takes it, so `maxTimeMs`
   * bounds tokenization and a hanging server as it bounds generation.
   */
  private readonly signal: AbortSignal;
  private readonly timeout: AbortSignal;

  private promptIds: number[] = [];
  /** Set when the prompt came from the model's chat template: sent with every call (see CompletionRequest.chat). */
  private chat: CompletionRequest["chat"];
  /** Prompt plus every segment: what the next model call reads. */
  private readonly context: number[] = [];
  private readonly segments: Segment[] = [];
  /** Characters of completion text so far: the coordinate system of step spans. */
  private textLength = 0;
  /** Text of the turn being generated (calls that stopped for length) and where it starts. */
  private pending = "";
  private pendingStart = 0;
  /** Steps the runtime acted on, plus its observations: what the transition rules are checked on. */
  private readonly accepted: Step[] = [];
  private readonly suggestions: string[] = [];
  private readonly calls: CallRecord[] = [];
  private readonly formatErrors: FormatError[] = [];
  private readonly meta: RuntimeMeta;
  private promptFormat: Trajectory["promptFormat"];
  private readonly stats: TrajectoryStats = emptyTrajectoryStats();

  constructor(private readonly opts: RunOptions) {
    const budget = withDefaults(DEFAULT_BUDGET, opts.budget);
    const context = opts.model.contextLength;
    this.budget = context ? { ...budget, maxTokens: Math.min(budget.maxTokens, context) } : budget;
    this.sampling = withDefaults(DEFAULT_SAMPLING, opts.sampling);
    this.stops = stopSequences(opts.profile);
    this.tools = new ToolCaller(opts.tools);
    this.emit = opts.onEvent ?? (() => {});
    this.started = opts.startedAt ?? performance.now();
    this.deadline = this.started + this.budget.maxTimeMs;
    this.timeout = AbortSignal.timeout(Math.max(0, Math.ceil(this.deadline - performance.now())));
    this.signal = opts.signal ? AbortSignal.any([opts.signal, this.timeout]) : this.timeout;
    this.meta = {
      budget: this.budget,
      sampling: this.sampling,
      calls: this.calls,
      formatErrors: this.formatErrors,
    };
  }

  /** Records the episode whatever happens: an unexpected error ends it as a model error, not a throw. */
  async run(): Promise<RunTrajectory> {
    try {
      return await this.loop();
    } catch (err) {
      if (this.opts.signal?.aborted) throw err;
      return this.modelError(err);
    }
  }

  private async loop(): Promise<RunTrajectory> {
    // The caller may have spent the time already (`startedAt`: coa run waiting on GET /v1/models).
    if (this.timeUp()) return this.outOfBudget("max_time");
    try {
      this.promptIds = await this.timedModel(() => this.prompt());
    } catch (err) {
      return this.failed(err);
    }
    appendAll(this.context, this.promptIds);
    this.stats.promptTokens = this.promptIds.length;

    for (;;) {
      this.opts.signal?.throwIfAborted();
      if (this.stats.turns >= this.budget.maxTurns) return this.outOfBudget("max_turns");
      const room = this.budget.maxTokens - this.context.length;
      if (room <= 0) return this.outOfBudget("max_tokens");
      if (this.timeUp()) return this.outOfBudget("max_time");

      const turn = ++this.stats.turns;
      const called = await this.callModel(turn, room);
      if (called.type === "ended") return called.trajectory;
      if (called.choice.finishReason === "length") continue;

      const ended = await this.endTurn(turn, this.calls.at(-1)!);
      if (ended) return ended;
    }
  }

  /**
   * The prompt's ids: through the model's own chat template where its server applies one, so an
   * instruct or AFM model reads what it was trained on; else `renderPrompt`'s plain text.
   */
  private async prompt(): Promise<number[]> {
    const { model, profile, question, dialect, systemPrompt } = this.opts;
    const options = { profile, question, dialect, systemPrompt };
    const { signal } = this;
    const messages = promptMessages(options);
    const chat = (await model.chatPrompt?.(messages, { signal })) ?? null;
    if (chat) {
      this.chat = { messages, promptTokens: chat.ids.length };
      if (!chat.exact) this.meta.exactIds = false;
    }
    this.promptFormat = { chatTemplate: chat !== null, customSystemPrompt: systemPrompt !== undefined };
    return chat ? chat.ids : model.tokenize(renderPrompt(options), { signal });
  }

  /** One model call, recorded; or the trajectory, when the call ends the episode. */
  private async callModel(turn: number, room: number): Promise<CallOutcome> {
    const { seed } = this.sampling;
    const asked = Math.min(this.sampling.maxTokensPerTurn, room);
    const { signal } = this;
    let choice: CompletionChoice;
    let cutTokens = 0;
    const modelStart = performance.now();
    try {
      const result = await this.opts.model.complete(
        {
          promptIds: this.context.slice(),
          stop: this.stops,
          maxTokens: asked,
          temperature: this.sampling.temperature,
          topP: this.sampling.topP,
          // One seed per call, so turns do not replay the same random stream.
          seed: seed === undefined ? undefined : seed + turn - 1,
          logprobs: true,
          chat: this.chat,
        },
        { signal },
      );
      choice = result.choices[0]!;
      cutTokens = Math.max(0, choice.tokenIds.length - asked);
      if (cutTokens) choice = await this.cutToBudget(choice, asked, signal);
    } catch (err) {
      this.stats.modelMs += performance.now() - modelStart;
      return { type: "ended", trajectory: this.failed(err) };
    }
    const modelMs = performance.now() - modelStart;
    this.stats.modelMs += modelMs;
    this.stats.modelCalls++;
    this.stats.contextTokens += this.context.length;
    this.appendModel(choice);
    this.calls.push({
      turn,
      modelMs: round(modelMs),
      modelTokens: choice.tokenIds.length,
      finishReason: choice.finishReason,
      action: "continue",
      ...(cutTokens ? { cutTokens } : {}),
    });
    this.emit({
      type: "model",
      turn,
      text: choice.text,
      tokens: choice.tokenIds.length,
      ms: modelMs,
      finishReason: choice.finishReason,
    });
    return { type: "called", choice };
  }

  /**
   * A reply longer than asked (a server ignoring max_tokens) is cut to what was asked, as if it had
   * stopped for length: the record stays within budget, its ids are a prefix of what the model
   * sampled, logprobs stay aligned, and the text is decoded from the kept ids.
   */
  private async cutToBudget(
    choice: CompletionChoice,
    asked: number,
    signal: AbortSignal,
  ): Promise<CompletionChoice> {
    const tokenIds = choice.tokenIds.slice(0, asked);
    return {
      ...choice,
      tokenIds,
      logprobs: choice.logprobs?.slice(0, asked),
      text: await this.opts.model.detokenize(tokenIds, { signal }),
      finishReason: "length",
      stopSequence: null,
    };
  }

  /**
   * Parses the pending turn and clears it: its steps, in completion coordinates, and its format
   * errors from the parser and from the transition rules.
   */
  private parseTurn(turn: number): { start: number; steps: Step[]; errors: FormatError[] } {
    const start = this.pendingStart;
    const { dialect } = this.opts;
    const parsed = parseCoa(this.pending, { modelOutput: true, dialect });
    this.pending = "";
    this.pendingStart = this.textLength;
    const steps = parsed.steps.map((s) => shiftStep(s, start));
    for (const step of steps) this.emit({ type: "step", turn, step });
    const errors = [
      ...parsed.errors.map((e) => shiftError(e, start)),
      // Rules are checked on everything acted on so far; only breaches in this turn are new.
      ...validateTrajectorySteps([...this.accepted, ...steps], this.opts.profile, {
        complete: false,
        dialect,
      }).filter((e) => e.span.start >= start),
    ].sort((a, b) => a.span.start - b.span.start);
    return { start, steps, errors };
  }

  /** Acts on a finished turn; returns the trajectory when the episode is over. */
  private async endTurn(turn: number, record: CallRecord): Promise<RunTrajectory | undefined> {
    const { start, steps, errors } = this.parseTurn(turn);

    const answer = steps.find((s) => s.type === "answer");
    if (answer) {
      this.countFormatErrors(turn, errors);
      record.action = "answer";
      return this.finish("answer", answerOf(answer.text, this.opts.dialect));
    }
    const last = steps.at(-1);
    if (errors.length === 0 && last?.type !== "tool_call")
      errors.push({
        kind: "bad_transition",
        message: NO_ACTION_MESSAGE,
        span: { start, end: this.textLength },
      });
    if (errors.length) {
      this.countFormatErrors(turn, errors);
      if (this.stats.formatErrors > this.budget.maxFormatErrors) return this.outOfBudget("format_errors");
      record.action = "feedback";
      return this.appendObservation(turn, formatFeedback(errors), false, record);
    }

    appendAll(this.accepted, steps);
    for (const step of steps) if (step.type === "suggested_answer") this.suggestions.push(step.text);
    if (this.suggestions.length >= 2 && steps.some((s) => s.type === "suggested_answer")) {
      record.action = "answer";
      return this.finish("promoted_suggested_answer", this.suggestions[1]!);
    }

    if (last?.type !== "tool_call") return undefined;
    record.action = "tool";
    record.tool = last.tool;
    const toolStart = performance.now();
    const outcome = await this.callTool(turn, last);
    if (!outcome) return this.outOfBudget("max_time");
    const toolMs = performance.now() - toolStart;
    this.stats.toolMs += toolMs;
    this.stats.toolCalls[last.tool] = (this.stats.toolCalls[last.tool] ?? 0) + 1;
    if (outcome.duplicate) this.stats.duplicateCalls++;
    record.toolMs = round(toolMs);
    record.duplicate = outcome.duplicate;
    this.emit({ type: "tool_end", turn, tool: last.tool, ...outcome });
    return this.appendObservation(turn, outcome.observation.text, true, record);
  }

  /** Runs (or answers from memory) one tool call; undefined when no time is left to run it. */
  private async callTool(
    turn: number,
    call: Extract<Step, { type: "tool_call" }>,
  ): Promise<ToolCallOutcome | undefined> {
    const prepared = this.tools.prepare(call.tool, call.args);
    if (!("tool" in prepared)) return { observation: prepared, duplicate: false };
    const timeLeft = this.deadline - performance.now();
    if (timeLeft <= 0) return undefined;
    this.emit({ type: "tool_start", turn, tool: call.tool, args: call.args });
    return this.tools.run(prepared, {
      timeoutMs: Math.min(this.opts.toolTimeoutMs ?? DEFAULT_TOOL_TIMEOUT_MS, timeLeft),
      maxChars: this.opts.maxObservationChars ?? DEFAULT_MAX_OBSERVATION_CHARS,
      goal: this.opts.question,
      signal: this.opts.signal,
    });
  }

  private appendModel(choice: CompletionChoice): void {
    const segment: Segment = { source: "model", ids: choice.tokenIds };
    if (choice.logprobs) segment.logprobs = choice.logprobs;
    this.segments.push(segment);
    appendAll(this.context, choice.tokenIds);
    this.stats.modelTokens += choice.tokenIds.length;
    if (choice.exactIds === false) this.meta.exactIds = false;
    this.pending += choice.text;
    this.textLength += choice.text.length;
  }

  /**
   * Appends `<observation>` as a tool segment. Tool results join the steps the rules check; format
   * feedback does not, since the turn it answers was not acted on.
   */
  private async appendObservation(
    turn: number,
    text: string,
    fromTool: boolean,
    record: CallRecord,
  ): Promise<RunTrajectory | undefined> {
    const rendered = renderObservation(text);
    let ids: number[];
    try {
      ids = await this.timedModel(() => this.opts.model.tokenize(rendered, { signal: this.signal }));
    } catch (err) {
      return this.failed(err);
    }
    this.segments.push({ source: "tool", ids });
    appendAll(this.context, ids);
    this.stats.toolTokens += ids.length;
    record.observationTokens = ids.length;
    // The observation element starts after the leading separator.
    const span = { start: this.textLength + 1, end: this.textLength + rendered.length - 1 };
    this.textLength += rendered.length;
    this.pendingStart = this.textLength;
    const step: Step = { type: "observation", text, span };
    if (fromTool) this.accepted.push(step);
    this.emit({ type: "step", turn, step });
    return undefined;
  }

  private countFormatErrors(turn: number, errors: FormatError[]): void {
    if (errors.length === 0) return;
    this.stats.formatErrors += errors.length;
    appendAll(this.formatErrors, errors);
    this.emit({ type: "format_error", turn, errors, total: this.stats.formatErrors });
  }

  private async timedModel<T>(call: () => Promise<T>): Promise<T> {
    const start = performance.now();
    try {
      return await call();
    } finally {
      this.stats.modelMs += performance.now() - start;
    }
  }

  /** A budget ran out: the last suggested answer stands in for the answer when there is one. */
  private outOfBudget(reason: FinishReason): RunTrajectory {
    if (this.pending) this.countTruncatedTurn(reason);
    const fallback = this.suggestions.at(-1);
    if (fallback === undefined) return this.finish(reason, null);
    this.meta.budgetExhausted = reason;
    return this.finish("fallback_suggested_answer", fallback);
  }

  /**
   * A turn the budget cut before it stopped (the model was still writing, e.g. looping) is model
   * output too: its errors count, plus one for the cut, so such an episode is not scored clean.
   * Its steps are not acted on.
   */
  private countTruncatedTurn(reason: FinishReason): void {
    const turn = this.stats.turns;
    const { start, errors } = this.parseTurn(turn);
    const cut: FormatError = {
      kind: "truncated_turn",
      message: `the turn was cut by the ${reason} budget before it stopped`,
      span: { start, end: this.textLength },
    };
    this.countFormatErrors(turn, [cut, ...errors]);
  }

  /** Past the deadline (the timer may fire a moment after the clock says so). */
  private timeUp(): boolean {
    return this.timeout.aborted || performance.now() >= this.deadline;
  }

  /**
   * How a failed model call ends the episode: the caller's abort rejects, a call the deadline cut
   * (or any failure once time is up) is `max_time`, anything else `model_error`.
   */
  private failed(err: unknown): RunTrajectory {
    if (this.opts.signal?.aborted) throw this.opts.signal.reason;
    if (this.timeUp()) return this.outOfBudget("max_time");
    return this.modelError(err);
  }

  private modelError(err: unknown): RunTrajectory {
    const message = err instanceof Error ? `${err.name}: ${err.message}` : String(err);
    this.meta.error = clipServerText(message, MAX_ERROR_CHARS);
    return this.finish("model_error", null);
  }

  private finish(finishReason: FinishReason, answer: string | null): RunTrajectory {
    this.stats.wallMs = round(performance.now() - this.started);
    this.stats.modelMs = round(this.stats.modelMs);
    this.stats.toolMs = round(this.stats.toolMs);
    const trajectory: RunTrajectory = {
      version: TRAJECTORY_VERSION,
      id: randomUUID(),
      ...(this.opts.taskId === undefined ? {} : { taskId: this.opts.taskId }),
      question: this.opts.question,
      profile: this.opts.profile,
      ...(this.opts.dialect ? { dialect: this.opts.dialect } : {}),
      ...(this.promptFormat?.chatTemplate || this.promptFormat?.customSystemPrompt
        ? { promptFormat: this.promptFormat }
        : {}),
      model: this.opts.model.name,
      tokenizer: this.opts.model.tokenizer,
      promptIds: this.promptIds,
      segments: this.segments,
      answer,
      finishReason,
      stats: this.stats,
      origin: this.opts.origin ?? "run",
      meta: { runtime: this.meta },
    };
    this.emit({ type: "finish", finishReason, answer, trajectory });
    return trajectory;
  }
}

/** Defaults overridden by the given fields; a field given as undefined keeps its default. */
function withDefaults<T extends object>(defaults: T, given: Partial<T> = {}): T {
  const out = { ...defaults };
  for (const [key, value] of Object.entries(given))
    if (value !== undefined) (out as Record<string, unknown>)[key] = value;
  return out;
}

const round = (ms: number) => Math.round(ms * 100) / 100;

/** `meta.runtime.error` keeps this much: model clients clip server bodies, this bounds any other error. */
const MAX_ERROR_CHARS = 2_000;

function shiftStep(step: Step, by: number): Step {
  return step.span ? { ...step, span: { start: step.span.start + by, end: step.span.end + by } } : step;
}

function shiftError(error: FormatError, by: number): FormatError {
  return { ...error, span: { start: error.span.start + by, end: error.span.end + by } };
}
