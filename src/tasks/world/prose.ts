import type { Claim, MinorSource, World } from "./build.js";
import { indefinite } from "./names.js";
import { Rng } from "./prng.js";
import { type Attr, articleId, docUrl, type Entity, type EntityType, type WorldDoc } from "./schema.js";

// Our own article templates, a few phrasings per type, and the reader that recognises exactly these
// phrasings. Keep the two together: a new phrasing needs a reader pattern, and the tests check that
// every rendered fact reads back.

const num = (n: number): string => n.toLocaleString("en-US");

/** How a name reads inside a sentence: organizations and events take "the", works and people none. */
export function inSentence(e: Pick<Entity, "type" | "name">): string {
  return e.type === "organization" || e.type === "event" ? `the ${e.name}` : e.name;
}

const capitalFirst = (s: string): string => s.charAt(0).toUpperCase() + s.slice(1);

export function renderArticle(world: World, e: Entity): WorldDoc {
  const v = new Rng(`${world.seed}:${e.id}`).int(0, 2);
  const name = (id: string | number | undefined) => world.byId.get(String(id))!.name;
  const a = e.attrs;
  const subject = capitalFirst(inSentence(e));
  let text: string;
  switch (e.type) {
    case "person": {
      const s = e.name.split(" ").at(-1)!;
      const occ = indefinite(String(a.occupation));
      const place = name(a.birthplace);
      const first = [
        `${e.name} (born ${a.birthYear} in ${place}) was ${occ}.`,
        `${e.name} was ${occ}, born in ${place} in ${a.birthYear}.`,
        `${e.name} was born in ${a.birthYear} in ${place} and became ${occ}.`,
      ][v];
      const mentor =
        a.mentor === undefined
          ? `Little is known of ${s}'s teachers.`
          : [
              `${s} studied under ${name(a.mentor)}.`,
              `${s}'s mentor was ${name(a.mentor)}.`,
              `${s} trained under ${name(a.mentor)}.`,
            ][v];
      text = `${first} ${mentor}`;
      break;
    }
    case "city": {
      const country = name(a.country);
      text = [
        `${e.name} is a city in ${country}, founded in ${a.founded}. It has a population of ${num(Number(a.population))}.`,
        `${e.name} is a city in ${country}. It was founded in ${a.founded} and is home to ${num(Number(a.population))} people.`,
        `Founded in ${a.founded}, ${e.name} is a city in ${country} with a population of ${num(Number(a.population))}.`,
      ][v];
      const capitalOf = world.capitalOf.get(e.id);
      if (capitalOf) text += ` It is the capital of ${name(capitalOf)}.`;
      break;
    }
    case "country":
      text = [
        `${e.name} is a country whose capital is ${name(a.capital)}. It became independent in ${a.independence} and has a population of ${num(Number(a.population))}.`,
        `${e.name} is a country with its capital at ${name(a.capital)}. Independent since ${a.independence}, it is home to ${num(Number(a.population))} people.`,
        `${e.name} is a country whose capital is ${name(a.capital)}. Independent since ${a.independence}, it has a population of ${num(Number(a.population))}.`,
      ][v];
      break;
    case "organization": {
      const kind = indefinite(String(a.kind));
      const hq = name(a.hq);
      const founder = name(a.founder);
      const members = num(Number(a.members));
      text = [
        `${subject} is ${kind} based in ${hq}. It was founded in ${a.founded} by ${founder} and has ${members} members.`,
        `${subject} is ${kind} founded by ${founder} in ${a.founded}. Based in ${hq}, it has ${members} members.`,
        `Founded in ${a.founded} by ${founder}, ${inSentence(e)} is ${kind} based in ${hq} with ${members} members.`,
      ][v];
      break;
    }
    case "work": {
      const author = name(a.author);
      const pages = num(Number(a.pages));
      text = [
        `${e.name} is ${indefinite(String(a.kind))} by ${author}, published in ${a.year}. It runs to ${pages} pages.`,
        `${e.name} is a ${pages}-page ${a.kind} written by ${author} and published in ${a.year}.`,
        `Published in ${a.year}, ${e.name} is ${indefinite(String(a.kind))} by ${author}. It has ${pages} pages.`,
      ][v];
      break;
    }
    case "event": {
      const place = name(a.location);
      const org = name(a.organizer);
      const people = num(Number(a.attendance));
      text = [
        `${subject} was held in ${place} in ${a.year}. Organized by the ${org}, it drew ${people} attendees.`,
        `${subject} took place in ${place} in ${a.year}. It was organized by the ${org} and attracted ${people} attendees.`,
        `In ${a.year}, ${place} hosted ${inSentence(e)}, organized by the ${org}; ${people} people attended.`,
      ][v];
      break;
    }
  }
  const twin = world.twinOf.get(e.id);
  if (twin) text += ` Not to be confused with ${inSentence(world.byId.get(twin)!)}.`;
  const id = articleId(e.name);
  return { id, title: e.name, text, url: docUrl(id) };
}

/**
 * The sentence a minor source writes, stating `value` (a number, or an entity id) for the fact. A
 * sentence that also names a year uses the page's own (wrong) year when it claims one.
 */
function factSentence(
  world: World,
  e: Entity,
  attr: Attr,
  value: number | string,
  claims: readonly Claim[],
): string {
  const subject = inSentence(e);
  const name = typeof value === "string" ? world.byId.get(value)!.name : "";
  const claimed = (a: Attr) => claims.find((c) => c.attr === a)?.wrong ?? e.attrs[a];
  switch (attr) {
    case "birthplace":
      return `${subject} was born in ${name} in ${claimed("birthYear")}`;
    case "mentor":
      return `${subject}'s mentor was ${name}`;
    case "founder":
      return `${subject} was founded by ${name}`;
    case "hq":
      return `${subject} is based in ${name}`;
    case "author":
      return `${subject} was written by ${name}`;
    case "location":
      return `${subject} was held in ${name} in ${claimed("year")}`;
    case "organizer":
      return `${subject} was organized by the ${name}`;
    case "birthYear":
      return `${subject} was born in ${value}`;
    case "founded":
      return `${subject} was founded in ${value}`;
    case "population":
      return `${subject} has a population of ${num(Number(value))}`;
    case "members":
      return `${subject} has ${num(Number(value))} members`;
    case "pages":
      return `${subject} runs to ${num(Number(value))} pages`;
    case "attendance":
      return `${subject} drew ${num(Number(value))} attendees`;
    case "year":
      return e.type === "work"
        ? `${subject} was published in ${value}`
        : `${subject} was held in ${world.byId.get(String(claimed("location")))!.name} in ${value}`;
    default:
      throw new Error(`no minor-source sentence for ${e.type}.${attr}`);
  }
}

const slug = (s: string): string =>
  s
    .toLowerCase()
    .replace(/[^a-z0-9]+/g, "-")
    .replace(/^-|-$/g, "");

export function renderMinorSource(world: World, m: MinorSource): WorldDoc {
  const e = world.byId.get(m.entityId)!;
  const facts = m.claims.map((c) => factSentence(world, e, c.attr, c.wrong, m.claims));
  if (m.site === "fans") {
    const id = `fans/${articleId(e.name).slice("wiki/".length)}`;
    const text = `${facts.map((f) => `${capitalFirst(f)}.`).join(" ")} This fan page is kept by readers and has not been checked against the records.`;
    return { id, title: e.name, text, url: docUrl(id) };
  }
  const id = `${m.site}/${slug(e.name)}`;
  const [title, text] =
    m.site === "blog"
      ? [
          `${e.name}: notes from a reader`,
          `Notes from my weekend reading. As far as I can tell, ${facts[0]}. Corrections welcome.`,
        ]
      : [
          `Forum: a question about ${e.name}`,
          `A user asks: is it true that ${facts[0]}? Nobody in the thread could confirm it.`,
        ];
  return { id, title, text, url: docUrl(id) };
}

export function renderNews(world: World, eventId: string): WorldDoc {
  const e = world.byId.get(eventId)!;
  const place = world.byId.get(String(e.attrs.location))!.name;
  const org = world.byId.get(String(e.attrs.organizer))!.name;
  const id = `news/${slug(e.name)}-recap`;
  const text = `Our reporter visited ${inSentence(e)} in ${place}. The ${org} says ${num(Number(e.attrs.attendance))} people attended.`;
  return { id, title: `Recap: ${e.name}`, text, url: docUrl(id) };
}

const NAME = String.raw`[A-Z][\w'-]*(?: [A-Z][\w'-]*)*`;
const YEAR = String.raw`(\d{4})`;
const COUNT = String.raw`(\d[\d,]*)`;
const rx = (source: string) => new RegExp(source);

/** Patterns per type and attribute; the first capture group that matched is the value. */
const READERS: Readonly<Record<EntityType, Partial<Record<Attr, RegExp[]>>>> = {
  person: {
    birthYear: [rx(`\\bborn (?:in )?${YEAR}`), rx(`\\bborn in ${NAME} in ${YEAR}`)],
    birthplace: [rx(`\\bborn (?:in )?\\d{4} in (${NAME})`), rx(`\\bborn in (${NAME}) in \\d{4}`)],
    occupation: [/\b(?:was|became) an? ([a-z][a-z ]*?)(?:[,.]| and)/],
    mentor: [rx(`(?:studied under|mentor was|trained under) (${NAME})`)],
  },
  city: {
    country: [rx(`\\bcity in (${NAME})`)],
    founded: [rx(`\\b[Ff]ounded in ${YEAR}`)],
    population: [rx(`population of ${COUNT}`), rx(`home to ${COUNT} people`)],
  },
  country: {
    capital: [rx(`capital (?:is|at) (${NAME})`)],
    independence: [rx(`[Ii]ndependent (?:in|since) ${YEAR}`)],
    population: [rx(`population of ${COUNT}`), rx(`home to ${COUNT} people`)],
  },
  organization: {
    kind: [/ is an? ([a-z][a-z ]*?) (?:based|founded)/],
    founded: [rx(`\\b[Ff]ounded in ${YEAR}`), rx(`\\bfounded by ${NAME} in ${YEAR}`)],
    founder: [rx(`\\b[Ff]ounded (?:in \\d{4} )?by (${NAME})`)],
    hq: [rx(`\\b[Bb]ased in (${NAME})`)],
    members: [rx(`\\b${COUNT} members`)],
  },
  work: {
    kind: [/ is an? (?:[\d,]+-page )?([a-z][a-z ]*?) (?:by|written)/],
    author: [rx(`\\bby (${NAME})`)],
    year: [rx(`\\b[Pp]ublished in ${YEAR}`)],
    pages: [rx(`\\b${COUNT}[- ]pages?\\b`)],
  },
  event: {
    year: [rx(`\\b(?:held|took place) in ${NAME} in ${YEAR}`), rx(`\\bIn ${YEAR}, ${NAME} hosted`)],
    location: [rx(`\\b(?:held|took place) in (${NAME})`), rx(`\\bIn \\d{4}, (${NAME}) hosted`)],
    organizer: [rx(`\\b[Oo]rganized by the (${NAME})`)],
    attendance: [rx(`\\b${COUNT} (?:attendees|people attended)`)],
  },
};

/**
 * Reads one fact about the subject of a world text (an article, a page, or a search snippet of one):
 * the value as written, counts without thousands separators; null when the text does not state it.
 */
export function readFact(type: EntityType, attr: Attr, text: string): string | null {
  for (const pattern of READERS[type][attr] ?? []) {
    const m = pattern.exec(text);
    const value = m?.slice(1).find((g) => g !== undefined);
    if (value !== undefined) return /^\d[\d,]*$/.test(value) ? value.replace(/,/g, "") : value;
  }
  return null;
}

/** The words a searcher adds to a name to find a fact: the ones this world's prose states it with. */
const QUERY_WORDS: Partial<Record<Attr, string>> = {
  founder: "founded by",
  founded: "founded",
  birthYear: "born",
  birthplace: "born",
  mentor: "mentor",
  occupation: "occupation",
  hq: "based in",
  members: "members",
  author: "written by",
  pages: "pages",
  location: "held in",
  organizer: "organized by",
  attendance: "attendees",
  country: "city in",
  population: "population",
  capital: "capital",
  independence: "independent",
  year: "year",
};

/** A search query for some facts about a subject: the name, then a word or two per fact. */
export function queryFor(subject: string, attrs: readonly Attr[]): string {
  const words = [...new Set(attrs.map((a) => QUERY_WORDS[a] ?? ""))].filter(Boolean);
  return [subject, ...words].join(" ");
}
