import type { World } from "./build.js";
import { comparedPick, computeValue, type Plan, type PlanStep, type PlanSubject } from "./plan.js";
import type { Rng } from "./prng.js";
import { inSentence, renderMinorSource } from "./prose.js";
import { ATTRS, type Attr, articleId, type Entity, type EntityType, refType } from "./schema.js";

export type WorldKind = "multihop" | "arithmetic" | "comparison";
export type Difficulty = "easy" | "medium" | "hard";

/** A generated question before it gets an id and a split. */
export interface DraftQuestion {
  kind: WorldKind | "computation";
  template: string;
  question: string;
  answers: string[];
  group: number | null;
  hops: number;
  plan: Plan;
  /** Entities whose articles the question needs, in reading order, plus an entity answer. */
  entities: string[];
  supportingDocs: string[];
  /** Distractor documents a reader can trip on: near-duplicate articles and wrong minor sources. */
  distractors: string[];
  difficulty: Difficulty;
}

/** A walk along relations: the entities read, in order, and the fact asked of the last one. */
interface Chain {
  path: Entity[];
  attrs: Attr[];
  value: string | number;
}

const end = (c: Chain): Entity => c.path.at(-1)!;
const finalAttr = (c: Chain): Attr => c.attrs.at(-1)!;

// Noun phrases for "the <relation> of X", and the question that asks for a chain's last fact.
const RELATION_NP: Partial<Record<Attr, (x: string) => string>> = {
  founder: (x) => `the founder of ${x}`,
  birthplace: (x) => `the birthplace of ${x}`,
  mentor: (x) => `the mentor of ${x}`,
  hq: (x) => `the city where ${x} is based`,
  country: (x) => `the country of ${x}`,
  capital: (x) => `the capital of ${x}`,
  author: (x) => `the author of ${x}`,
  location: (x) => `the host city of ${x}`,
  organizer: (x) => `the organizer of ${x}`,
};

const ASK: Partial<Record<Attr, (x: string, type: EntityType) => string>> = {
  founder: (x) => `Who founded ${x}?`,
  birthplace: (x) => `In which city was ${x} born?`,
  mentor: (x) => `Who was the mentor of ${x}?`,
  hq: (x) => `In which city is ${x} based?`,
  country: (x) => `In which country is ${x}?`,
  capital: (x) => `What is the capital of ${x}?`,
  author: (x) => `Who wrote ${x}?`,
  location: (x) => `In which city was ${x} held?`,
  organizer: (x) => `Which organization organized ${x}?`,
  birthYear: (x) => `In what year was ${x} born?`,
  occupation: (x) => `What was the occupation of ${x}?`,
  founded: (x) => `In what year was ${x} founded?`,
  population: (x) => `What is the population of ${x}?`,
  independence: (x) => `In what year did ${x} become independent?`,
  members: (x) => `How many members does ${x} have?`,
  year: (x, type) => (type === "work" ? `In what year was ${x} published?` : `In what year was ${x} held?`),
  pages: (x) => `How many pages does ${x} have?`,
  attendance: (x) => `How many people attended ${x}?`,
};

/** How a year fact reads as a moment: "the birth of X", "the founding of X", … */
function yearMoment(attr: Attr, type: EntityType, x: string): string {
  if (attr === "birthYear") return `the birth of ${x}`;
  if (attr === "founded") return `the founding of ${x}`;
  if (attr === "independence") return `the independence of ${x}`;
  return type === "work" ? `the publication of ${x}` : x;
}

const YEAR_ATTRS: readonly Attr[] = ["birthYear", "founded", "year", "independence"];
const COUNT_ATTRS: readonly Attr[] = ["population", "members", "pages", "attendance"];

function baseNp(e: Entity): string {
  return e.type === "work" ? `"${e.name}"` : inSentence(e);
}

/** The noun phrase naming a chain's last entity: "the founder of the Northgate Survey Society". */
function subjectNp(c: Chain): string {
  let np = baseNp(c.path[0]);
  for (const attr of c.attrs.slice(0, -1)) np = RELATION_NP[attr]!(np);
  return np;
}

/** Every chain of `length` lookups starting at `start` that never revisits an entity. */
function chainsFrom(world: World, start: Entity, length: number): Chain[] {
  const out: Chain[] = [];
  const walk = (path: Entity[], attrs: Attr[]) => {
    const here = path.at(-1)!;
    for (const attr of Object.keys(ATTRS[here.type]) as Attr[]) {
      const raw = here.attrs[attr];
      if (raw === undefined || attr === "kind") continue;
      const target = refType(here.type, attr) ? world.byId.get(String(raw))! : null;
      if (target && path.includes(target)) continue;
      if (attrs.length + 1 === length) {
        out.push({ path, attrs: [...attrs, attr], value: target ? target.name : raw });
      } else if (target) {
        walk([...path, target], [...attrs, attr]);
      }
    }
  };
  walk([start], []);
  return out;
}

function lookupSteps(c: Chain, offset: number): PlanStep[] {
  return c.attrs.map((attr, i) => ({
    op: "lookup" as const,
    subject: i === 0 ? c.path[0].name : { ref: offset + i - 1 },
    type: c.path[i].type,
    attr,
  }));
}

/** The label a comparison answers with: the chain's last entity, named or found along the way. */
function chainLabel(c: Chain, offset: number): PlanSubject {
  return c.attrs.length === 1 ? c.path[0].name : { ref: offset + c.attrs.length - 2 };
}

/** Counts are accepted with or without thousands separators; years are written plainly. */
function numberAnswers(n: number, isYear = false): string[] {
  return isYear || Math.abs(n) < 1000 ? [String(n)] : [String(n), n.toLocaleString("en-US")];
}

function difficultyOf(score: number): Difficulty {
  return score <= 2 ? "easy" : score <= 4 ? "medium" : "hard";
}

/** Collects the distractor documents that sit next to a question's supporting facts. */
function distractorsOf(world: World, chains: Chain[]): string[] {
  const docs = new Set<string>();
  for (const c of chains) {
    c.path.forEach((e, i) => {
      for (const near of world.nearNames.get(e.id) ?? []) docs.add(articleId(world.byId.get(near)!.name));
      for (const m of world.minorSourcesOf.get(e.id) ?? []) {
        if (m.claims.some((claim) => claim.attr === c.attrs[i])) docs.add(renderMinorSource(world, m).id);
      }
    });
  }
  return [...docs].sort();
}

/** `tail` steps refer to the lookups by absolute index: the chains' steps come first, in order. */
function draft(
  world: World,
  kind: WorldKind,
  template: string,
  question: string,
  answers: string[],
  chains: Chain[],
  tail: PlanStep[],
  extraDifficulty: number,
): DraftQuestion {
  const steps: PlanStep[] = [];
  for (const c of chains) steps.push(...lookupSteps(c, steps.length));
  const entities = new Set<string>();
  for (const c of chains) {
    for (const e of c.path) entities.add(e.id);
    const answerRef = refType(end(c).type, finalAttr(c));
    if (answerRef) entities.add(String(end(c).attrs[finalAttr(c)]));
  }
  const supportingDocs = [...new Set(chains.flatMap((c) => c.path.map((e) => articleId(e.name))))];
  const hops = chains.reduce((n, c) => n + c.attrs.length, 0);
  const distractors = distractorsOf(world, chains);
  return {
    kind,
    template,
    question,
    answers,
    group: chains[0].path[0].group,
    hops,
    plan: { steps: [...steps, ...tail] },
    entities: [...entities],
    supportingDocs,
    distractors,
    difficulty: difficultyOf(hops + extraDifficulty + (distractors.length ? 1 : 0)),
  };
}

function multihop(world: World, c: Chain): DraftQuestion {
  const question = ASK[finalAttr(c)]!(subjectNp(c), end(c).type);
  const answers =
    typeof c.value === "number" ? numberAnswers(c.value, YEAR_ATTRS.includes(finalAttr(c))) : [c.value];
  return draft(world, "multihop", `chain:${c.attrs.join(">")}`, question, answers, [c], [], 0);
}

function yearsBetween(world: World, a: Chain, b: Chain): DraftQuestion | null {
  const [x, y] = [Number(a.value), Number(b.value)];
  if (x === y) return null;
  const question = `How many years passed between ${yearMoment(finalAttr(a), end(a).type, subjectNp(a))} and ${yearMoment(finalAttr(b), end(b).type, subjectNp(b))}?`;
  const n = a.attrs.length + b.attrs.length;
  return draft(
    world,
    "arithmetic",
    "years_between",
    question,
    numberAnswers(computeValue("abs_difference", [x, y])),
    [a, b],
    [{ op: "compute", fn: "abs_difference", args: [{ ref: a.attrs.length - 1 }, { ref: n - 1 }] }],
    1,
  );
}

const COUNT_TOTAL: Record<string, (items: string) => string> = {
  population: (items) => `What is the combined population of ${items}?`,
  members: (items) => `What is the total number of members of ${items}?`,
  pages: (items) => `How many pages do ${items} have in total?`,
  attendance: (items) => `How many people attended ${items} in total?`,
};
const COUNT_MORE: Record<string, (a: string, b: string) => string> = {
  population: (a, b) => `How many more people live in ${a} than in ${b}?`,
  members: (a, b) => `How many more members does ${a} have than ${b}?`,
  pages: (a, b) => `How many more pages does ${a} have than ${b}?`,
  attendance: (a, b) => `How many more people attended ${a} than ${b}?`,
};

const listNp = (items: string[]): string =>
  items.length === 2 ? `${items[0]} and ${items[1]}` : `${items.slice(0, -1).join(", ")} and ${items.at(-1)}`;

function countSum(world: World, chains: Chain[]): DraftQuestion | null {
  if (new Set(chains.map((c) => end(c).id)).size < chains.length) return null;
  const attr = finalAttr(chains[0]);
  const question = COUNT_TOTAL[attr](listNp(chains.map(subjectNp)));
  const total = computeValue(
    "sum",
    chains.map((c) => Number(c.value)),
  );
  let offset = 0;
  const args = chains.map((c) => {
    offset += c.attrs.length;
    return { ref: offset - 1 };
  });
  return draft(
    world,
    "arithmetic",
    `sum_${attr}`,
    question,
    numberAnswers(total),
    chains,
    [{ op: "compute", fn: "sum", args }],
    1,
  );
}

function countDifference(world: World, a: Chain, b: Chain): DraftQuestion | null {
  const [x, y] = [Number(a.value), Number(b.value)];
  if (x === y || end(a).id === end(b).id) return null;
  const [hi, lo] = x > y ? [a, b] : [b, a];
  const attr = finalAttr(a);
  const question = COUNT_MORE[attr](subjectNp(hi), subjectNp(lo));
  const n = hi.attrs.length + lo.attrs.length;
  return draft(
    world,
    "arithmetic",
    `more_${attr}`,
    question,
    numberAnswers(Math.abs(x - y)),
    [hi, lo],
    [{ op: "compute", fn: "difference", args: [{ ref: hi.attrs.length - 1 }, { ref: n - 1 }] }],
    1,
  );
}

const COMPARE: Record<string, { min: string; max: string }> = {
  birthYear: { min: "Who was born earlier", max: "Who was born later" },
  founded: { min: "Which was founded earlier", max: "Which was founded more recently" },
  year: { min: "Which came first", max: "Which came later" },
  independence: {
    min: "Which country became independent earlier",
    max: "Which country became independent later",
  },
  population: { min: "Which has the smaller population", max: "Which has the larger population" },
  members: { min: "Which has fewer members", max: "Which has more members" },
  pages: { min: "Which is shorter", max: "Which is longer" },
  attendance: { min: "Which drew fewer attendees", max: "Which drew more attendees" },
};

function comparison(world: World, a: Chain, b: Chain, pick: "min" | "max"): DraftQuestion | null {
  const [x, y] = [Number(a.value), Number(b.value)];
  // One side naming the other ("X or the mentor of X") gives the answer away.
  if (x === y || a.path.includes(end(b)) || b.path.includes(end(a))) return null;
  const attr = finalAttr(a);
  const question = `${COMPARE[attr][pick]}: ${subjectNp(a)} or ${subjectNp(b)}?`;
  const winner = [a, b][comparedPick(pick, x, y)]!;
  const n = a.attrs.length + b.attrs.length;
  return draft(
    world,
    "comparison",
    `compare_${attr}_${pick}`,
    question,
    [end(winner).name],
    [a, b],
    [
      {
        op: "compare",
        pick,
        values: [{ ref: a.attrs.length - 1 }, { ref: n - 1 }],
        labels: [chainLabel(a, 0), chainLabel(b, a.attrs.length)],
      },
    ],
    0,
  );
}

export interface Quotas {
  multihop: number;
  arithmetic: number;
  comparison: number;
}

/** The most lookups a question may need, and the default. */
export const MAX_HOPS = 4;

/**
 * Draws one group's questions: multihop evenly over 2 to `maxHops` hops, then arithmetic and
 * comparisons needing at most `maxHops` lookups in all.
 */
export function groupQuestions(
  world: World,
  group: number,
  quotas: Quotas,
  rng: Rng,
  maxHops = MAX_HOPS,
): DraftQuestion[] {
  const members = world.entities.filter((e) => e.group === group);
  const chains = (length: number) => members.flatMap((e) => chainsFrom(world, e, length));
  const short = [...chains(1), ...(maxHops > 2 ? chains(2) : [])];
  const out: DraftQuestion[] = [];

  const hopCounts = Array.from({ length: maxHops - 1 }, (_, i) => i + 2);
  for (const hops of hopCounts) {
    const pool = rng.shuffle(chains(hops));
    out.push(...pool.slice(0, Math.ceil(quotas.multihop / hopCounts.length)).map((c) => multihop(world, c)));
  }

  const sameFact = (a: Chain, b: Chain) => finalAttr(a) === finalAttr(b) && end(a).type === end(b).type;
  const byFamily = (attrs: readonly Attr[]) => short.filter((c) => attrs.includes(finalAttr(c)));
  const years = byFamily(YEAR_ATTRS);
  const counts = byFamily(COUNT_ATTRS);
  const pairs = (pool: Chain[], same: boolean): [Chain, Chain] | null => {
    const a = rng.pick(pool);
    const options = pool.filter(
      (b) => b !== a && (!same || sameFact(a, b)) && a.attrs.length + b.attrs.length <= maxHops,
    );
    return options.length ? [a, rng.pick(options)] : null;
  };
  const fill = (quota: number, make: () => DraftQuestion | null) => {
    const made: DraftQuestion[] = [];
    const seen = new Set<string>();
    for (let tries = 0; made.length < quota && tries < quota * 20; tries++) {
      const q = make();
      if (q && !seen.has(q.question)) {
        seen.add(q.question);
        made.push(q);
      }
    }
    out.push(...made);
  };

  fill(quotas.arithmetic, () => {
    const roll = rng.int(0, 2);
    if (roll === 0) {
      const p = pairs(years, false);
      return p && yearsBetween(world, ...p);
    }
    if (roll === 1) {
      const p = pairs(counts, true);
      return p && countDifference(world, ...p);
    }
    const p = pairs(counts, true);
    if (!p) return null;
    const thirds = counts.filter((c) => c.attrs.length === 1 && sameFact(c, p[0]) && !p.includes(c));
    const roomy = p[0].attrs.length + p[1].attrs.length + 1 <= maxHops;
    return countSum(world, roomy && thirds.length && rng.chance(0.3) ? [...p, rng.pick(thirds)] : p);
  });

  fill(quotas.comparison, () => {
    const p = pairs(rng.chance(0.5) ? years : counts, true);
    return p && comparison(world, ...p, rng.chance(0.5) ? "min" : "max");
  });
  return out;
}
