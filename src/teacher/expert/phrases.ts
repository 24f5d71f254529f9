import { type Attr, type EntityType, inSentence } from "../../tasks/index.js";

// The expert's own wording: what it calls each fact, how it searches for it, and how it reports it.

const ATTR_NAMES: Partial<Record<Attr, string>> = {
  founder: "founder",
  founded: "founding year",
  birthYear: "birth year",
  birthplace: "birthplace",
  mentor: "mentor",
  occupation: "occupation",
  hq: "home city",
  members: "member count",
  author: "author",
  pages: "page count",
  location: "host city",
  organizer: "organizer",
  attendance: "attendance",
  country: "country",
  population: "population",
  capital: "capital",
  independence: "year of independence",
};

export function attrName(type: EntityType, attr: Attr): string {
  if (attr === "year") return type === "work" ? "publication year" : "year";
  return ATTR_NAMES[attr] ?? attr;
}

/** "the founder and founding year" */
export function attrList(type: EntityType, attrs: readonly Attr[]): string {
  const names = attrs.map((a) => attrName(type, a));
  return `the ${names.length > 1 ? `${names.slice(0, -1).join(", ")} and ${names.at(-1)}` : names[0]}`;
}

export const TYPE_NOUNS: Record<EntityType, string> = {
  person: "person",
  city: "city",
  country: "country",
  organization: "organization",
  work: "work",
  event: "event",
};

/** One reported fact as a short clause: "the Trik Textile Union was founded by Amon Vesk". */
export function factClause(type: EntityType, attr: Attr, subject: string, value: string): string {
  const s = inSentence({ type, name: subject });
  switch (attr) {
    case "birthYear":
    case "birthplace":
      return `${s} was born in ${value}`;
    case "occupation":
      return `${s} was a ${value}`;
    case "mentor":
      return `${s}'s mentor was ${value}`;
    case "founder":
      return `${s} was founded by ${value}`;
    case "founded":
      return `${s} was founded in ${value}`;
    case "hq":
      return `${s} is based in ${value}`;
    case "members":
      return `${s} has ${value} members`;
    case "author":
      return `${s} was written by ${value}`;
    case "year":
      return type === "work" ? `${s} was published in ${value}` : `${s} took place in ${value}`;
    case "pages":
      return `${s} has ${value} pages`;
    case "location":
      return `${s} was held in ${value}`;
    case "organizer":
      return `${s} was organized by the ${value}`;
    case "attendance":
      return `${s} drew ${value} attendees`;
    case "country":
      return `${s} is in ${value}`;
    case "population":
      return `${s} has a population of ${value}`;
    case "capital":
      return `the capital of ${s} is ${value}`;
    case "independence":
      return `${s} became independent in ${value}`;
    default:
      return `${s}: ${attr} ${value}`;
  }
}
