import { ByteTokenizer, type Tokenizer } from "../../model/index.js";
import { renderCodeArgs } from "../../protocol/index.js";
import {
  type Attr,
  type ComputeFn,
  type EntityType,
  inSentence,
  Plan,
  type PlanStep,
  type PlanSubject,
  queryFor,
  Rng,
  readFact,
  type Task,
} from "../../tasks/index.js";
import { capitalize } from "../../util/index.js";
import type { AgentCall, AgentReply, Driver, DriverEpisode } from "../agents.js";
import type { MasMessage } from "../trace.js";
import { type Hit, isArticle, isOwnArticle, looksLike, pageKind, parseHits } from "./hits.js";
import { attrList, attrName, factClause, TYPE_NOUNS } from "./phrases.js";
import { arithmeticCode, comparisonCode, programCode, readLabel, readNumber, withTypo } from "./python.js";

/**
 * How often the expert slips, and how often its critic and verifier catch a slip. The rates make a
 * fallible but self-correcting teacher: mistakes happen only where a distractor is actually in the
 * search results (or in the code), and recovery runs through the critic and the verifier.
 */
export const EXPERT_RATES = {
  /**
   * The searcher skims: takes the first result that looks like the subject and states the fact.
   * Rare enough that a distilled student learns to read the encyclopedia article, not result 1.
   */
  hasty: 0.25,
  criticCatch: 0.6,
  verifierCatch: 0.75,
  /** The critic remarks on a distractor it saw even when the searcher was not fooled. */
  note: 0.5,
  codeCrash: 0.12,
  /** The coder forgets abs() in a span of years. */
  signSlip: 0.3,
  criticSign: 0.85,
};

export interface ExpertOptions {
  /** Varies the expert's slips between runs; the same seed gives the same traces. */
  seed?: number;
  /** False: a careful expert that never slips (used to check that questions are answerable). */
  lapses?: boolean;
  searchTool?: "web_search" | "wiki_search";
  /** Counts each agent call's tokens (default: bytes); give the student's to compare costs with it. */
  tokenizer?: Tokenizer;
}

/**
 * The offline stand-in for a strong LLM team on generated-world tasks: a programmatic policy that
 * follows the question's decomposition (task.meta.plan), but finds every fact through the real search
 * tool's results and every number through the real code sandbox, slips on distractors, and recovers.
 */
export class ExpertDriver implements Driver {
  readonly name = "expert" as const;
  readonly model = "expert-v1";
  readonly tokenizer: string;
  private readonly tok: Tokenizer;

  constructor(private readonly options: ExpertOptions = {}) {
    this.tok = options.tokenizer ?? new ByteTokenizer();
    this.tokenizer = this.tok.name;
  }

  episode(task: Task): DriverEpisode {
    return new ExpertEpisode(task, this.tok, this.options);
  }
}

interface Found {
  value: string;
  /** The search result the fact was read from; null for computed values. */
  source: Hit | null;
  subject: string;
}

interface LookupJob {
  kind: "lookup";
  steps: number[];
  subject: string;
  type: EntityType;
  attrs: Attr[];
  careful: boolean;
  hasty: boolean;
  /** The article to read straight away, when the critic pointed it out. */
  url: string | null;
  queries: string[];
  seen: Hit[];
  chosen: Hit | null;
  crawling: boolean;
  toolFailures: number;
  facts: Partial<Record<Attr, string>>;
}

interface CodeJob {
  kind: "code";
  step: number;
  code: string;
  crash: boolean;
  failures: number;
  firstError: string;
  fn: ComputeFn | null;
  /** What the program's answer is: a number (a sum, a program's result) or a name (a comparison). */
  prints: "number" | "label";
  result: string | null;
}

type Job = LookupJob | CodeJob;

/** The steps that use `step`'s result, directly or through other steps. */
function dependents(steps: readonly PlanStep[], roots: readonly number[]): number[] {
  const out = new Set(roots);
  const refs = (s: PlanStep): number[] => {
    const ref = (x: PlanSubject) => (typeof x === "string" ? [] : [x.ref]);
    if (s.op === "lookup") return ref(s.subject);
    if (s.op === "compute") return s.args.map((a) => a.ref);
    if (s.op === "compare") return [...s.values.map((v) => v.ref), ...s.labels.flatMap(ref)];
    return [];
  };
  steps.forEach((s, i) => {
    if (refs(s).some((r) => out.has(r))) out.add(i);
  });
  return [...out].sort((a, b) => a - b);
}

/** The plan's last line: every plan ends with its answer, so finishing is a plan step too. */
const ANSWER_LINE = "Answer with the result.";

const stepHeading = (line: number, text: string) => `Step ${line}: ${text}`;

class ExpertEpisode implements DriverEpisode {
  private readonly plan: Plan | null;
  private readonly rng: Rng;
  private readonly lapses: boolean;
  private readonly searchTool: string;
  private readonly results: (Found | undefined)[];
  private readonly attempts: number[];
  private readonly careful = new Set<number>();
  private job: Job | null = null;
  private lastJob: Job | null = null;
  private redo: number[] | null = null;
  private redoUrl: string | null = null;
  /** Facts read from their own articles in this episode, by type|subject|attr: never looked up twice. */
  private readonly known = new Map<string, Found>();
  /** The values a re-check replaces, by step. */
  private readonly replaced = new Map<number, string>();
  private rejected: number | null = null;
  private conflicts = 0;
  /** The line of the latest plan that each step is written on ("Step 2: …"), by step index. */
  private lineOf: number[] = [];
  /** The number of the latest plan's last line, "Step N: Answer with the result.". */
  private answerLine = 1;

  constructor(
    private readonly task: Task,
    private readonly tok: Tokenizer,
    options: ExpertOptions,
  ) {
    const parsed = Plan.safeParse(task.meta.plan);
    this.plan = parsed.success ? parsed.data : null;
    this.rng = new Rng(`${options.seed ?? 0}:${task.id}`);
    this.lapses = options.lapses ?? true;
    this.searchTool = options.searchTool ?? "web_search";
    this.results = new Array(this.plan?.steps.length ?? 0).fill(undefined);
    this.attempts = new Array(this.plan?.steps.length ?? 0).fill(0);
  }

  async call(call: AgentCall): Promise<AgentReply | null> {
    const started = performance.now();
    if (!this.plan) throw new Error("the expert driver needs a generated-world task with meta.plan");
    const text = this.respond(call, this.plan);
    if (text === null) return null;
    return {
      text,
      tokensIn: this.tok.encode(call.context).length,
      tokensOut: this.tok.encode(text).length,
      ms: performance.now() - started,
    };
  }

  private respond(call: AgentCall, plan: Plan): string | null {
    const last = call.messages.at(-1);
    const observation = last?.kind === "observation" ? last : undefined;
    switch (call.role) {
      case "manager":
        if (call.purpose === "plan") return this.planText(plan, 0, "");
        if (call.purpose === "replan") return this.replan(plan);
        return this.nextMove(plan);
      case "searcher":
        return this.searcherMove(observation);
      case "coder":
        return this.coderMove(observation);
      case "critic":
        return this.review();
      case "verifier":
        return this.verify(plan);
    }
  }

  /** A slip happens (or a check succeeds) with probability p; a careful expert never slips. */
  private slip(p: number): boolean {
    return this.lapses && this.rng.chance(p);
  }

  private catches(p: number): boolean {
    return !this.lapses || this.rng.chance(p);
  }

  private subjectOf(s: PlanSubject): string | null {
    return typeof s === "string" ? s : (this.results[s.ref]?.value ?? null);
  }

  // ---- manager -------------------------------------------------------------------------------

  private stepLine(plan: Plan, i: number): string {
    const s = plan.steps[i];
    switch (s.op) {
      case "lookup": {
        // A subject found by an earlier step is "that person" until it is known (as in a re-plan).
        const name = this.subjectOf(s.subject);
        const who = name ? inSentence({ type: s.type, name }) : `that ${TYPE_NOUNS[s.type]}`;
        return `${this.careful.has(i) ? "Re-check" : "Find"} the ${attrName(s.type, s.attr)} of ${who}.`;
      }
      case "compute":
        return s.fn === "sum" ? "Add up the numbers with code." : "Compute the difference with code.";
      case "compare":
        // Which one, first: a copy of the plan's line is sure only up to its first word after
        // "Step N:". Behind a long shared opening ("Compare … pick the smaller") the student wrote
        // the wrong side in 21 of 41 copies; the code then copies the min() or max() just written.
        return s.pick === "min"
          ? "Smaller of the two values, with min() in code."
          : "Larger of the two values, with max() in code.";
      case "program":
        return "Write and run a Python program for it.";
    }
  }

  /**
   * The steps still to do, from `from` on, as a numbered plan that ends with the answer. Each move
   * then opens with its plan line, number included ("Step 3: Add up the numbers with code."), so
   * what to do next is a copy of the plan's line after the last one written, the same for a
   * computation, a comparison or the answer, rather than a recall of the question's kind.
   */
  private planText(plan: Plan, from: number, heading: string): string {
    const lines: string[] = [];
    plan.steps.forEach((_, i) => {
      if (i < from || this.results[i]) return;
      const line = this.stepLine(plan, i);
      const prev = lines.at(-1);
      // "Find the founder of X." + "Find the founding year of X." read as one step.
      const merged = prev && mergeLookups(prev, line);
      if (merged) lines[lines.length - 1] = merged;
      else lines.push(line);
      this.lineOf[i] = lines.length;
    });
    lines.push(ANSWER_LINE);
    this.answerLine = lines.length;
    return `${heading}${lines.map((l, i) => stepHeading(i + 1, l)).join("\n")}`;
  }

  /** Forgets `roots` (to be re-checked carefully) and every result derived from them. */
  private reset(plan: Plan, roots: number[]): void {
    for (const i of roots) {
      this.careful.add(i);
      const old = this.results[i]?.value;
      if (old !== undefined) this.replaced.set(i, old);
    }
    for (const i of dependents(plan.steps, roots)) this.results[i] = undefined;
  }

  private replan(plan: Plan): string {
    const from = this.rejected ?? 0;
    this.reset(plan, [from]);
    this.rejected = null;
    return this.planText(plan, from, "Revised plan:\n");
  }

  private nextMove(plan: Plan): string {
    let thought = "";
    if (this.redo) {
      this.reset(plan, this.redo);
      this.redo = null;
      thought = "Good catch; redo that step.\n";
    }
    for (let i = 0; i < plan.steps.length; i++) {
      if (this.results[i]) continue;
      const step = plan.steps[i];
      this.attempts[i]++;
      if (this.attempts[i] > 3) return `${thought}I cannot establish this fact.\nANSWER: unknown`;
      switch (step.op) {
        case "lookup": {
          const subject = this.subjectOf(step.subject)!;
          const known = this.known.get(`${step.type}|${subject}|${step.attr}`);
          if (known && !this.careful.has(i)) {
            this.results[i] = known;
            thought += `Already known: ${factClause(step.type, step.attr, subject, known.value)}.\n`;
            continue;
          }
          return thought + this.delegateLookup(plan, i);
        }
        case "compute": {
          const values = step.args.map((a) => Number(this.results[a.ref]!.value));
          const slip =
            step.fn === "abs_difference" && !this.careful.has(i) && this.slip(EXPERT_RATES.signSlip);
          this.startCode(i, arithmeticCode(step.fn, values, slip), step.fn, "number");
          const ask =
            step.fn === "sum"
              ? `Add up ${values.join(", ")}.`
              : step.fn === "difference"
                ? `Compute ${values[0]} minus ${values[1]}.`
                : `Compute how many years lie between ${values[0]} and ${values[1]}.`;
          // The plan's own line first, as a lookup's request is: what to do next is then a copy of
          // the next plan step, which a small student makes reliably, not a recall of the question.
          return `${thought}CODE: ${stepHeading(this.lineOf[i]!, this.stepLine(plan, i))} ${ask}`;
        }
        case "program":
          this.startCode(i, programCode(step.name, step.params), null, "number");
          return `${thought}CODE: ${stepHeading(this.lineOf[i]!, this.stepLine(plan, i))} ${this.task.question}`;
        case "compare": {
          const values = step.values.map((v) => Number(this.results[v.ref]!.value));
          const labels = step.labels.map((l) => this.subjectOf(l)!);
          // Python picks, as it adds: which of two numbers is smaller is a guess for a small
          // student, and the printed name is then copied into the answer like a printed sum.
          this.startCode(i, comparisonCode(step.pick, labels, values), null, "label");
          const ask = `${labels[0]}: ${values[0]}; ${labels[1]}: ${values[1]}.`;
          return `${thought}CODE: ${stepHeading(this.lineOf[i]!, this.stepLine(plan, i))} ${ask}`;
        }
      }
    }
    return `${thought}${stepHeading(this.answerLine, ANSWER_LINE)}\nANSWER: ${this.results.at(-1)!.value}`;
  }

  private delegateLookup(plan: Plan, i: number): string {
    const step = plan.steps[i] as Extract<PlanStep, { op: "lookup" }>;
    const subject = this.subjectOf(step.subject)!;
    // Other facts about the same subject come from the same article: ask for them together.
    const steps = plan.steps
      .map((s, j) => ({ s, j }))
      .filter(
        ({ s, j }) =>
          !this.results[j] &&
          s.op === "lookup" &&
          s.type === step.type &&
          this.subjectOf(s.subject) === subject,
      )
      .map(({ j }) => j);
    const attrs = steps.map((j) => (plan.steps[j] as Extract<PlanStep, { op: "lookup" }>).attr);
    const careful = steps.some((j) => this.careful.has(j));
    this.job = {
      kind: "lookup",
      steps,
      subject,
      type: step.type,
      attrs,
      careful,
      hasty: !careful && this.slip(EXPERT_RATES.hasty),
      url: careful ? this.redoUrl : null,
      queries: [],
      seen: [],
      chosen: null,
      crawling: false,
      toolFailures: 0,
      facts: {},
    };
    this.redoUrl = null;
    const what = `${attrList(step.type, attrs)} of ${inSentence({ type: step.type, name: subject })}`;
    const line = this.lineOf[i]!;
    if (!careful) return `SEARCH: ${stepHeading(line, `Find ${what}.`)}`;
    return `SEARCH: ${stepHeading(line, `Re-check ${what}`)} in its own encyclopedia article${this.job.url ? `, ${this.job.url}` : ""}.`;
  }

  private startCode(step: number, code: string, fn: ComputeFn | null, prints: CodeJob["prints"]): void {
    const crash = this.slip(EXPERT_RATES.codeCrash);
    this.job = { kind: "code", step, code, crash, failures: 0, firstError: "", fn, prints, result: null };
  }

  // ---- searcher ------------------------------------------------------------------------------

  private search(job: LookupJob, query: string, thought: string): string {
    job.queries.push(query);
    job.crawling = false;
    return `${thought ? `${thought}\n` : ""}<${this.searchTool}>${query}</${this.searchTool}>`;
  }

  private searcherMove(observation: MasMessage | undefined): string {
    const job = this.job;
    if (job?.kind !== "lookup") return "REPORT: I was given nothing to look up.";
    if (!observation) {
      if (job.url) {
        job.chosen = { rank: 0, title: job.subject, url: job.url, snippet: "" };
        job.crawling = true;
        return `<crawl_page>${job.url}</crawl_page>`;
      }
      // The delegated request already says what to find: the first search needs no preamble. A
      // re-check searches differently, so it never repeats the call that misled it.
      return this.search(job, job.careful ? job.subject : queryFor(job.subject, job.attrs), "");
    }
    if (!observation.ok) {
      job.toolFailures++;
      if (job.toolFailures > 1) return this.reportLookup(job);
      return this.search(job, job.subject, "That call failed; search the name alone.");
    }
    if (job.crawling) {
      this.readFacts(job, observation.content);
      return this.reportLookup(job);
    }
    const hits = parseHits(observation.content);
    job.seen.push(...hits);
    const chosen = job.hasty ? this.skim(job, hits) : hits.find((h) => isOwnArticle(h, job.subject));
    if (!chosen) {
      if (job.queries.length < 2)
        return this.search(
          job,
          job.subject,
          `No article titled ${job.subject} in the results; search the name alone.`,
        );
      return this.reportLookup(job);
    }
    job.chosen = chosen;
    job.facts = {};
    this.readFacts(job, chosen.snippet);
    const missing = job.attrs.filter((a) => job.facts[a] === undefined);
    if (missing.length === 0) return this.reportLookup(job);
    job.crawling = true;
    return `The snippet does not give ${attrList(job.type, missing)}; open the page.\n<crawl_page>${chosen.url}</crawl_page>`;
  }

  /** A hurried reader: the first result that looks like the subject and states the fact wins. */
  private skim(job: LookupJob, hits: Hit[]): Hit | undefined {
    const candidates = hits.filter((h) => looksLike(h, job.subject));
    const states = (h: Hit) => job.attrs.every((a) => readFact(job.type, a, h.snippet) !== null);
    return candidates.find(states) ?? candidates[0];
  }

  private readFacts(job: LookupJob, text: string): void {
    for (const attr of job.attrs) job.facts[attr] ??= readFact(job.type, attr, text) ?? undefined;
  }

  private reportLookup(job: LookupJob): string {
    this.lastJob = job;
    this.job = null;
    const np = inSentence({ type: job.type, name: job.subject });
    const missing = job.attrs.filter((a) => job.facts[a] === undefined);
    if (!job.chosen || missing.length)
      return `REPORT: I could not find ${attrList(job.type, missing.length ? missing : job.attrs)} of ${np}.`;
    job.steps.forEach((step, k) => {
      const found = { value: job.facts[job.attrs[k]]!, source: job.chosen, subject: job.subject };
      this.results[step] = found;
      if (isOwnArticle(found.source!, job.subject))
        this.known.set(`${job.type}|${job.subject}|${job.attrs[k]}`, found);
    });
    const clauses = job.attrs.map((a) => factClause(job.type, a, job.subject, job.facts[a]!));
    // Cite the search result by rank (a crawled page by its URL): short, and enough to check it.
    const source = job.chosen.rank > 0 ? `result ${job.chosen.rank}` : job.chosen.url;
    return `REPORT: ${capitalize(clauses.join("; "))}. Source: ${source}.`;
  }

  // ---- coder ---------------------------------------------------------------------------------

  private coderMove(observation: MasMessage | undefined): string {
    const job = this.job;
    if (job?.kind !== "code") return "REPORT: I was given nothing to compute.";
    const run = (code: string) => `<code>${renderCodeArgs({ code })}</code>`;
    if (!observation) return run(job.crash ? withTypo(job.code) : job.code);
    const failed = !observation.ok || /Traceback|Error/.test(observation.content);
    if (failed) {
      job.failures++;
      job.firstError ||= errorLine(observation.content);
      if (job.failures > 2) return this.reportCode(job, null);
      return `It failed (${errorLine(observation.content)}); fix it and rerun.\n${run(job.code)}`;
    }
    return this.reportCode(
      job,
      job.prints === "label" ? readLabel(observation.content) : readNumber(observation.content),
    );
  }

  private reportCode(job: CodeJob, value: string | null): string {
    this.lastJob = job;
    this.job = null;
    if (value === null) return "REPORT: The program gave no usable number.";
    job.result = value;
    this.results[job.step] = { value, source: null, subject: "" };
    return `REPORT: ${value}`;
  }

  // ---- critic --------------------------------------------------------------------------------

  private review(): string | null {
    const job = this.lastJob;
    this.lastJob = null;
    if (!job) return null;
    return job.kind === "lookup" ? this.reviewLookup(job) : this.reviewCode(job);
  }

  private reviewLookup(job: LookupJob): string | null {
    const chosen = job.chosen;
    const np = inSentence({ type: job.type, name: job.subject });
    if (chosen && !isOwnArticle(chosen, job.subject)) {
      if (!this.catches(EXPERT_RATES.criticCatch)) return null;
      this.redo = job.steps;
      const own = job.seen.find((h) => isOwnArticle(h, job.subject));
      this.redoUrl = own?.url ?? null;
      const fix = own
        ? `Use result ${own.rank}, its own article (${own.url}).`
        : `Find ${job.subject}'s own article.`;
      return isArticle(chosen)
        ? `The report read the article on ${chosen.title}, a different ${TYPE_NOUNS[job.type]} from ${job.subject}. ${fix}`
        : `That comes from ${pageKind(chosen)} (${chosen.url}), not the encyclopedia. ${fix}`;
    }
    // After a setback the critic says what the re-check settled.
    if (chosen && job.careful && job.steps.some((i) => this.replaced.has(i))) {
      const changes = job.steps
        .filter((i) => this.replaced.has(i))
        .map((i) => [this.replaced.get(i)!, this.results[i]?.value] as const);
      const changed = changes.filter(([old, now]) => old !== now);
      return changed.length
        ? `The re-check in the article on ${job.subject} corrects the earlier value: ${changed.map(([old, now]) => `${old} is now ${now}`).join("; ")}.`
        : `The re-check in the article on ${job.subject} confirms ${changes.map(([old]) => old).join(" and ")}.`;
    }
    if (!chosen || !this.rng.chance(EXPERT_RATES.note)) return null;
    const twin = job.seen.find(
      (h) => isArticle(h) && !isOwnArticle(h, job.subject) && looksLike(h, job.subject),
    );
    if (twin)
      return `Result ${twin.rank} is ${twin.title}, a different ${TYPE_NOUNS[job.type]}; the report rightly uses ${job.subject}.`;
    for (const h of job.seen) {
      if (isArticle(h)) continue;
      for (const attr of job.attrs) {
        const claim = readFact(job.type, attr, h.snippet);
        if (claim !== null && claim !== job.facts[attr]) {
          this.conflicts++;
          return `${capitalize(pageKind(h))} gives ${claim} for the ${attrName(job.type, attr)} of ${np}, but the encyclopedia says ${job.facts[attr]}; keep the encyclopedia value.`;
        }
      }
    }
    if (job.queries.length > 1) return `The first search missed ${np}; the name alone found the article.`;
    return null;
  }

  private reviewCode(job: CodeJob): string | null {
    if (job.fn === "abs_difference" && job.result?.startsWith("-")) {
      if (!this.catches(EXPERT_RATES.criticSign)) return null;
      this.redo = [job.step];
      return `${job.result} years cannot be right: a span of years is never negative. Redo it with abs().`;
    }
    if (job.failures > 0 && job.result !== null) {
      return `The first run failed (${job.firstError}); the fixed program printed ${job.result}, which is plausible.`;
    }
    const old = this.replaced.get(job.step);
    if (old !== undefined && job.result !== null) return `Recomputed: ${job.result} replaces ${old}.`;
    return null;
  }

  // ---- verifier ------------------------------------------------------------------------------

  private verify(plan: Plan): string {
    const problems: { step: number; text: string }[] = [];
    plan.steps.forEach((s, i) => {
      const r = this.results[i];
      if (!r) return;
      if (s.op === "lookup" && r.source && !isOwnArticle(r.source, r.subject)) {
        const np = inSentence({ type: s.type, name: r.subject });
        const from = isArticle(r.source)
          ? `the article on ${r.source.title}`
          : `${pageKind(r.source)} (${r.source.url})`;
        problems.push({
          step: i,
          text: `The ${attrName(s.type, s.attr)} of ${np} came from ${from}, not from its own encyclopedia article.`,
        });
      }
      if (s.op === "compute" && s.fn === "abs_difference" && r.value.startsWith("-")) {
        problems.push({ step: i, text: `A span of ${r.value} years is impossible.` });
      }
    });
    if (problems.length && this.catches(EXPERT_RATES.verifierCatch)) {
      this.rejected = problems[0].step;
      return `${problems[0].text} The answer rests on it.\nSCORE: 2`;
    }
    if (this.results.some((r) => r === undefined) || this.results.at(-1)?.value === "unknown") {
      return "The team did not establish every fact the question needs.\nSCORE: 1";
    }
    const lookups = plan.steps.filter((s) => s.op === "lookup").length;
    const parts = [
      lookups
        ? `${lookups === 1 ? "The fact comes" : lookups === 2 ? "Both facts come" : `All ${lookups} facts come`} from the matching encyclopedia articles`
        : "",
      plan.steps.some((s) => s.op === "compute" || s.op === "program") ? "the computation ran in Python" : "",
      plan.steps.some((s) => s.op === "compare") ? "the comparison ran in Python" : "",
    ].filter(Boolean);
    return `${capitalize(parts.join("; "))}.\nSCORE: ${this.conflicts ? 4 : 5}`;
  }
}

/** "Find the founder of X." + "Find the founding year of X." -> "Find the founder and founding year of X." */
function mergeLookups(a: string, b: string): string | null {
  const re = /^(Find|Re-check) the (.+?) of (.+)\.$/;
  const [ma, mb] = [re.exec(a), re.exec(b)];
  if (!ma || !mb || ma[1] !== mb[1] || ma[3] !== mb[3] || ma[3].startsWith("that ")) return null;
  return `${ma[1]} the ${ma[2]} and ${mb[2]} of ${ma[3]}.`;
}

/** The line that says what went wrong: the exception line of a traceback, else the last line. */
function errorLine(text: string): string {
  const lines = text
    .split("\n")
    .map((l) => l.trim())
    .filter(Boolean);
  const line = lines.findLast((l) => /^\w+(Error|Exception)\b/.test(l)) ?? lines.at(-1) ?? "no output";
  return line.replace(/\. Did you mean.*$/, "").slice(0, 80);
}
