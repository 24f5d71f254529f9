import { z } from "zod";

/** The kinds of things the world holds; one encyclopedia article each. */
export const EntityType = z.enum(["country", "city", "person", "organization", "work", "event"]);
export type EntityType = z.infer<typeof EntityType>;

/** Every fact an article states about its subject. */
export const Attr = z.enum([
  "capital",
  "independence",
  "population",
  "country",
  "founded",
  "birthYear",
  "birthplace",
  "occupation",
  "mentor",
  "founder",
  "hq",
  "members",
  "author",
  "year",
  "pages",
  "location",
  "organizer",
  "attendance",
  "kind",
]);
export type Attr = z.infer<typeof Attr>;

/** What an attribute's value is: a year, a count, a word, or another entity (a relation). */
export type AttrValueKind = "year" | "count" | "text" | { ref: EntityType };

/** Which attributes each entity type carries, and what their values are. */
export const ATTRS: Readonly<Record<EntityType, Partial<Record<Attr, AttrValueKind>>>> = {
  country: { capital: { ref: "city" }, independence: "year", population: "count" },
  city: { country: { ref: "country" }, founded: "year", population: "count" },
  person: { birthYear: "year", birthplace: { ref: "city" }, occupation: "text", mentor: { ref: "person" } },
  organization: {
    kind: "text",
    founded: "year",
    founder: { ref: "person" },
    hq: { ref: "city" },
    members: "count",
  },
  work: { kind: "text", author: { ref: "person" }, year: "year", pages: "count" },
  event: { year: "year", location: { ref: "city" }, organizer: { ref: "organization" }, attendance: "count" },
};

export interface Entity {
  id: string;
  type: EntityType;
  name: string;
  /** The entity group (one country and everything in it); the test split holds out whole groups. */
  group: number;
  /** Years and counts are numbers, relations hold the other entity's id. */
  attrs: Partial<Record<Attr, string | number>>;
}

/** A corpus document: `{id, title, text, url}` as the search tools index it. */
export const WorldDoc = z.object({ id: z.string(), title: z.string(), text: z.string(), url: z.string() });
export type WorldDoc = z.infer<typeof WorldDoc>;

export const WORLD_HOST = "https://world.local";

/** A corpus id is the url path; the url is the host plus that path. */
export const docUrl = (id: string): string => `${WORLD_HOST}/${id}`;

/** "Varen Holt" -> "wiki/Varen_Holt"; quotes and other punctuation are dropped. */
export function articleId(title: string): string {
  return `wiki/${title.replace(/[^\p{L}\p{N} '-]/gu, "").replace(/ /g, "_")}`;
}

export function refType(type: EntityType, attr: Attr): EntityType | null {
  const kind = ATTRS[type][attr];
  return kind !== undefined && typeof kind === "object" ? kind.ref : null;
}
