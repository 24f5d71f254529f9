import { z } from "zod";
import {
  type Attr,
  articleId,
  type EntityType,
  inSentence,
  Plan,
  Rng,
  readFact,
  type Task,
  type WorldDoc,
} from "../../tasks/index.js";

/**
 * The kinds of pretraining text one world yields. `articles` and `pages` are its corpus as the
 * search tools serve it; the drills rehearse, without the agent protocol, the two copies the agent
 * fails at (issue 15): a name from the question into the first lookup, and a value from what was
 * read into the next step.
 * - `lookup`: a question, then `Lookup:` and the first name the question asks about.
 * - `chain`: a question, then every lookup its plan needs, each followed by the article found, the
 *   next subject copied out of it, and the answer.
 * - `facts`: an article, then a question about each fact it states and the value as written.
 */
export const DOC_KINDS = ["articles", "pages", "lookup", "chain", "facts"] as const;
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

/** A document from pieces; a `copy` piece is marked only when its text did occur before it. */
function build(kind: DocKind, pieces: readonly Piece[]): PretrainDoc {
  const parts: TextPart[] = [];
  let before = "";
  for (const piece of pieces) {
    const text = typeof piece === "string" ? piece : piece.copy;
    parts.push({ text, copy: typeof piece !== "string" && before.includes(text.trim()) });
    before += text;
  }
  return { kind, parts };
}

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

/**
 * Follows the question's plan through the world's articles. Null when the plan has no lookup or a
 * step cannot be followed (a chain with a gap would teach a copy from nowhere).
 */
export function chainDrill(task: Task, articles: ReadonlyMap<string, WorldDoc>): PretrainDoc | null {
  const plan = planOf(task);
  if (!plan?.steps.some((s) => s.op === "lookup")) return null;
  const pieces: Piece[] = [`Question: ${task.question}\n`];
  const results: (string | null)[] = [];
  for (const step of plan.steps) {
    if (step.op !== "lookup") {
      results.push(null);
      continue;
    }
    const subject = typeof step.subject === "string" ? step.subject : results[step.subject.ref];
    const article = subject ? articles.get(articleId(subject)) : undefined;
    const value = article ? readFact(step.type, step.attr, article.text) : null;
    if (!article || value === null) return null;
    pieces.push("Lookup:", { copy: ` ${subject}` }, `\nFound: ${article.text}\n`);
    results.push(value);
  }
  // An arithmetic answer is computed (by the code tool, in an episode), not read; it is left out.
  if (task.kind !== "arithmetic" && task.answers.length) {
    const read = pieces.map((p) => (typeof p === "string" ? p : p.copy)).join("");
    pieces.push("Answer:", { copy: ` ${asWritten(task.answers[0], read)}` }, "\n");
  }
  return build("chain", pieces);
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
  const some = <T>(xs: readonly T[], f: (x: T) => PretrainDoc | null) =>
    xs.map(f).filter((d): d is PretrainDoc => d !== null);
  return {
    articles: [...articles.values()].map((d) => build("articles", [plain(d)])),
    pages: world.corpus.filter((d) => !articles.has(d.id)).map((d) => build("pages", [plain(d)])),
    lookup: some(world.questions, lookupDrill),
    chain: some(world.questions, (t) => chainDrill(t, articles)),
    facts: some([...articles.values()], (d) => factsDrill(d, world.types.get(d.id)!)),
  };
}
