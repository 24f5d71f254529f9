import { z } from "zod";
import {
  type Attr,
  articleId,
  comparedPick,
  computeValue,
  docUrl,
  type EntityType,
  inSentence,
  Plan,
  type PlanStep,
  queryFor,
  Rng,
  readFact,
  type Task,
  type WorldDoc,
} from "../../tasks/index.js";
import { arithmeticCode } from "../../teacher/index.js";
import { formatHits, MemoryIndex } from "../../tools/index.js";

/**
 * The kinds of pretraining text one world yields. `articles` and `pages` are its corpus as the
 * search tools serve it; the drills rehearse, without the agent protocol, the two copies the agent
 * fails at (issue 15): a name from the question into the first lookup, and a value from what was
 * read into the next step.
 * - `lookup`: a question, then `Lookup:` and the first name the question asks about.
 * - `chain`: a question, then every lookup its plan needs, each followed by the article found, the
 *   next subject copied out of it, and the answer.
 * - `facts`: an article, then a question about each fact it states and the value as written.
 * - `search`: a chain whose lookups are searches of the world's corpus, each followed by the
 *   results as the search tool shows them (distractors and conflicting pages included) and the
 *   value read out of the right one: what an agent must do with an observation.
 * - `compute`: a search drill of a question that computes or compares, carried on to its end: the
 *   values read copied into the code and the printed result into the answer, or into the comparison.
 *   Numbers are copy targets here as names are everywhere else (docs/learning.md).
 */
export const DOC_KINDS = ["articles", "pages", "lookup", "chain", "facts", "search", "compute"] as const;
export const DocKind = z.enum(DOC_KINDS);
export type DocKind = z.infer<typeof DocKind>;

/** A stretch of a document; `copy` marks text that repeats, verbatim, something earlier in it. */
export interface TextPart {
  text: string;
  copy: boolean;
}

export interface PretrainDoc {
  kind: DocKind;
  parts: TextPart[];
}

/** What one world offers to write documents from. */
export interface WorldText {
  corpus: readonly WorldDoc[];
  /** The entity type of each encyclopedia article, by corpus id (`articleTypes`). */
  types: ReadonlyMap<string, EntityType>;
  /** The questions drills may use: a world's train split, never its dev, rl or test questions. */
  questions: readonly Task[];
}

export const docText = (doc: PretrainDoc): string => doc.parts.map((p) => p.text).join("");

type Piece = string | { copy: string };

/** Digits as the teacher writes them: without thousands separators. */
const ungrouped = (text: string): string => text.replace(/(\d),(?=\d{3})/g, "$1");

/**
 * A document from pieces; a `copy` piece is marked only when its text did occur before it (a number
 * written without the separators it was read with counts: the teacher copies values so).
 */
function build(kind: DocKind, pieces: readonly Piece[]): PretrainDoc {
  const parts: TextPart[] = [];
  let before = "";
  for (const piece of pieces) {
    const text = typeof piece === "string" ? piece : piece.copy;
    const copied =
      typeof piece !== "string" && (before.includes(text.trim()) || ungrouped(before).includes(text.trim()));
    parts.push({ text, copy: copied });
    before += text;
  }
  return { kind, parts };
}

/** The same document with only its copied numbers marked: what `eval_number_loss` scores. */
export const numberCopies = (doc: PretrainDoc): PretrainDoc => ({
  kind: doc.kind,
  parts: doc.parts.map((p) => ({ text: p.text, copy: p.copy && /\d/.test(p.text) })),
});

/** `readFact` drops thousands separators; a copy drill wants the value as the text writes it. */
function asWritten(value: string, text: string): string {
  if (text.includes(value) || !/^\d+$/.test(value)) return value;
  const grouped = Number(value).toLocaleString("en-US");
  return text.includes(grouped) ? grouped : value;
}

const PHRASES: Record<Attr, string> = {
  capital: "capital",
  independence: "year of independence",
  population: "population",
  country: "country",
  founded: "founding year",
  birthYear: "birth year",
  birthplace: "birthplace",
  occupation: "occupation",
  mentor: "mentor",
  founder: "founder",
  hq: "home city",
  members: "number of members",
  author: "author",
  year: "year",
  pages: "number of pages",
  location: "location",
  organizer: "organizer",
  attendance: "attendance",
  kind: "kind",
};

const plain = (doc: WorldDoc): string => `${doc.title}\n${doc.text}\n`;

const planOf = (task: Task): Plan | null => Plan.safeParse(task.meta.plan).data ?? null;

export function lookupDrill(task: Task): PretrainDoc | null {
  const first = planOf(task)?.steps[0];
  if (first?.op !== "lookup" || typeof first.subject !== "string") return null;
  return build("lookup", [`Question: ${task.question}\nLookup:`, { copy: ` ${first.subject}` }, "\n"]);
}

/** What one lookup of a plan adds to a drill: its text, and the value found (null: not found). */
type LookupReader = (
  subject: string,
  step: Extract<PlanStep, { op: "lookup" }>,
) => {
  pieces: Piece[];
  value: string | null;
};

type WorkStep = Extract<PlanStep, { op: "compute" | "compare" }>;
/** What a compute or compare step adds to a drill, from the plan's results so far (null: it cannot). */
type StepWorker = (
  step: WorkStep,
  results: readonly (string | null)[],
) => { pieces: Piece[]; value: string } | null;

/**
 * Follows the question's plan, one lookup after another, each subject copied from the question or
 * from an earlier lookup's value; then, given a `work`er, its computations; then the answer. Null
 * when the plan has no lookup or a step cannot be followed (a chain with a gap would teach a copy
 * from nowhere), or when the worked answer is not the question's.
 */
function planDrill(kind: DocKind, task: Task, read: LookupReader, work?: StepWorker): PretrainDoc | null {
  const plan = planOf(task);
  if (!plan?.steps.some((s) => s.op === "lookup")) return null;
  const pieces: Piece[] = [`Question: ${task.question}\n`];
  const results: (string | null)[] = [];
  for (const step of plan.steps) {
    if (step.op === "lookup") {
      const subject = typeof step.subject === "string" ? step.subject : results[step.subject.ref];
      const found = subject ? read(subject, step) : null;
      if (!found || found.value === null) return null;
      pieces.push(...found.pieces);
      results.push(found.value);
    } else if (work && step.op !== "program") {
      const done = work(step, results);
      if (!done) return null;
      pieces.push(...done.pieces);
      results.push(done.value);
    } else results.push(null);
  }
  if (work) {
    const answer = results.at(-1);
    if (!answer || !task.answers.includes(answer)) return null;
    pieces.push("Answer:", { copy: ` ${answer}` }, "\n");
  } else if (task.kind !== "arithmetic" && task.answers.length) {
    // Without the computation, an arithmetic answer comes from nowhere in the text: it is left out.
    const read = pieces.map((p) => (typeof p === "string" ? p : p.copy)).join("");
    pieces.push("Answer:", { copy: ` ${asWritten(task.answers[0], read)}` }, "\n");
  }
  return build(kind, pieces);
}

/** A plan followed through the world's articles: each lookup names the subject, then its article. */
export function chainDrill(task: Task, articles: ReadonlyMap<string, WorldDoc>): PretrainDoc | null {
  return planDrill("chain", task, (subject, step) => {
    const article = articles.get(articleId(subject));
    return {
      pieces: ["Lookup:", { copy: ` ${subject}` }, `\nFound: ${article?.text}\n`],
      value: article ? readFact(step.type, step.attr, article.text) : null,
    };
  });
}

/** How many results a search shows in a `search` drill: the demo's `--search-top-k`. */
export const SEARCH_DRILL_RESULTS = 3;

/** Each lookup as a search of the corpus and its results; the value as `written` (null: no value). */
function searchReader(index: MemoryIndex, written: "article" | "plain"): LookupReader {
  return (subject, step) => {
    const query = queryFor(subject, [step.attr]);
    const hits = index.search(query, SEARCH_DRILL_RESULTS);
    const own = hits.find((h) => h.url === docUrl(articleId(subject)));
    const value = own ? readFact(step.type, step.attr, own.snippet) : null;
    if (!own || value === null) return { pieces: [], value: null };
    return {
      pieces: [
        "Search:",
        { copy: ` ${subject}` },
        `${query.slice(subject.length)}\n${formatHits(query, hits)}\n`,
        `Found: the ${PHRASES[step.attr]} of ${inSentence({ type: step.type, name: subject })} is`,
        { copy: ` ${written === "article" ? asWritten(value, own.snippet) : value}` },
        "\n",
      ],
      value,
    };
  };
}

/**
 * A plan followed through searches of the world's corpus: each lookup is a query, the results as the
 * search tool prints them, and the value as the subject's own encyclopedia result states it (pages
 * that contradict it are among the results, as in an episode). A lookup whose article is not among
 * the results, or whose snippet does not state the fact, ends the drill (null).
 */
export function searchDrill(task: Task, index: MemoryIndex): PretrainDoc | null {
  return planDrill("search", task, searchReader(index, "article"));
}

const isInteger = (v: string | null): v is string => v !== null && /^-?\d+$/.test(v);

/** `code` in pieces, each whole occurrence of one of the integers `values` a copy. */
function copiesIn(code: string, values: readonly string[]): Piece[] {
  const longestFirst = [...new Set(values)].sort((a, b) => b.length - a.length);
  return code
    .split(new RegExp(`(?<![\\w-])(${longestFirst.join("|")})(?!\\w)`))
    .filter((part) => part !== "")
    .map((part) => (values.includes(part) ? { copy: part } : part));
}

/**
 * The teacher's computations in plain text: the code it writes on the values read (copied), the
 * result Python prints; or the two values side by side and the name that wins, as its manager
 * thinks them. The values are written as the teacher writes them, without separators.
 */
const workStep: StepWorker = (step, results) => {
  if (step.op === "compute") {
    const values = step.args.map((a) => results[a.ref]);
    if (!values.every(isInteger)) return null;
    const numbers = values.map(Number);
    const printed = String(computeValue(step.fn, numbers));
    return {
      pieces: ["Code:\n", ...copiesIn(arithmeticCode(step.fn, numbers), values), `\nOutput: ${printed}\n`],
      value: printed,
    };
  }
  const [a, b] = step.values.map((v) => results[v.ref]);
  const [first, second] = step.labels.map((l) => (typeof l === "string" ? l : results[l.ref]));
  if (!isInteger(a) || !isInteger(b) || !first || !second) return null;
  const winner = [first, second][comparedPick(step.pick, Number(a), Number(b))]!;
  return {
    pieces: [
      "Compare:",
      { copy: ` ${first}` },
      ":",
      { copy: ` ${a}` },
      ";",
      { copy: ` ${second}` },
      ":",
      { copy: ` ${b}` },
      `. The ${step.pick === "min" ? "smaller" : "larger"} is`,
      { copy: ` ${winner}` },
      "\n",
    ],
    value: winner,
  };
};

/** A search drill of a question that computes or compares, carried through its computation. */
export function computeDrill(task: Task, index: MemoryIndex): PretrainDoc | null {
  if (!planOf(task)?.steps.some((s) => s.op === "compute" || s.op === "compare")) return null;
  return planDrill("compute", task, searchReader(index, "plain"), workStep);
}

/** An article, then each fact it states asked about, in an order of its own (seeded by its id). */
export function factsDrill(doc: WorldDoc, type: EntityType): PretrainDoc | null {
  const facts = (Object.keys(PHRASES) as Attr[]).flatMap((attr) => {
    const value = readFact(type, attr, doc.text);
    return value === null ? [] : [{ attr, value: asWritten(value, doc.text) }];
  });
  if (!facts.length) return null;
  const subject = inSentence({ type, name: doc.title });
  return build("facts", [
    plain(doc),
    ...new Rng(doc.id)
      .shuffle(facts)
      .flatMap(({ attr, value }): Piece[] => [
        `Q: What is the ${PHRASES[attr]} of ${subject}?\nA:`,
        { copy: ` ${value}` },
        "\n",
      ]),
  ]);
}

/** Every document of every kind one world yields, in corpus and question order. */
export function worldDocuments(world: WorldText): Record<DocKind, PretrainDoc[]> {
  const articles = new Map(world.corpus.filter((d) => world.types.has(d.id)).map((d) => [d.id, d]));
  const index = new MemoryIndex(world.corpus);
  const some = <T>(xs: readonly T[], f: (x: T) => PretrainDoc | null) =>
    xs.map(f).filter((d): d is PretrainDoc => d !== null);
  return {
    articles: [...articles.values()].map((d) => build("articles", [plain(d)])),
    pages: world.corpus.filter((d) => !articles.has(d.id)).map((d) => build("pages", [plain(d)])),
    lookup: some(world.questions, lookupDrill),
    chain: some(world.questions, (t) => chainDrill(t, articles)),
    facts: some([...articles.values()], (d) => factsDrill(d, world.types.get(d.id)!)),
    search: some(world.questions, (t) => searchDrill(t, index)),
    compute: some(world.questions, (t) => computeDrill(t, index)),
  };
}
