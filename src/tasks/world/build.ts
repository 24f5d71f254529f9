import { z } from "zod";
import { NameBook, OCCUPATIONS, ORG_KINDS, WORK_KINDS } from "./names.js";
import { Rng } from "./prng.js";
import type { Attr, Entity, EntityType } from "./schema.js";

export const WorldSize = z.enum(["tiny", "small", "medium", "large"]);
export type WorldSize = z.infer<typeof WorldSize>;

export interface SizeConfig {
  /** Entity groups: one country with its cities, people, organizations, works and events. */
  groups: number;
  /** Groups whose questions all go to the test split. */
  heldOut: number;
  perGroup: { cities: number; people: number; organizations: number; works: number; events: number };
  /** Questions drawn per group and kind. */
  quotas: { multihop: number; arithmetic: number; comparison: number };
  /** Pure computation questions (no lookups). */
  computation: number;
}

const PER_GROUP = { cities: 4, people: 8, organizations: 4, works: 5, events: 3 };
const QUOTAS = { multihop: 66, arithmetic: 40, comparison: 34 };

export const SIZES: Readonly<Record<WorldSize, SizeConfig>> = {
  tiny: {
    groups: 4,
    heldOut: 1,
    perGroup: { cities: 3, people: 6, organizations: 3, works: 3, events: 2 },
    quotas: { multihop: 15, arithmetic: 9, comparison: 8 },
    computation: 12,
  },
  small: { groups: 26, heldOut: 3, perGroup: PER_GROUP, quotas: QUOTAS, computation: 300 },
  medium: { groups: 100, heldOut: 10, perGroup: PER_GROUP, quotas: QUOTAS, computation: 1200 },
  large: { groups: 400, heldOut: 40, perGroup: PER_GROUP, quotas: QUOTAS, computation: 4800 },
};

/** Distractor rates: how often a name has a near-duplicate elsewhere, and a fact has a wrong minor source. */
const NEAR_DUPLICATE_RATE: Partial<Record<EntityType, number>> = {
  person: 0.3,
  organization: 0.2,
  city: 0.15,
};
const MINOR_SOURCE_RATE = 0.5;
/** Relations a minor source may get wrong; the wrong entity comes from the same group. */
const MISSTATED_RELATIONS: readonly Attr[] = [
  "birthplace",
  "mentor",
  "founder",
  "hq",
  "author",
  "location",
  "organizer",
];
const NEWS_RATE = 0.3;

/** One wrong statement: a wrong year or count, or the id of the wrong entity for a relation. */
export interface Claim {
  attr: Attr;
  wrong: number | string;
}

/**
 * A page that misstates facts about one entity: the "conflicting minor source" distractor. A fan
 * page carries the entity's exact name as its title, so only its address tells it from the
 * encyclopedia article; blog and forum posts make one claim each.
 */
export interface MinorSource {
  entityId: string;
  site: "fans" | "blog" | "forum";
  claims: Claim[];
}

export interface World {
  seed: number;
  size: WorldSize;
  entities: Entity[];
  byId: ReadonlyMap<string, Entity>;
  heldOutGroups: number[];
  /** entity id -> the id of the entity its name is a near-duplicate of. */
  twinOf: ReadonlyMap<string, string>;
  /** entity id -> every entity whose name is a near-duplicate of its own, either way round. */
  nearNames: ReadonlyMap<string, readonly string[]>;
  minorSources: MinorSource[];
  /** entity id -> the minor sources about it. */
  minorSourcesOf: ReadonlyMap<string, readonly MinorSource[]>;
  /** city id -> the country it is the capital of. */
  capitalOf: ReadonlyMap<string, string>;
  /** Events that also have a (correct) news recap page. */
  newsEvents: string[];
}

const LAST_YEAR = 2020;

export function buildWorld(seed: number, size: WorldSize): World {
  const cfg = SIZES[size];
  const root = new Rng(seed);
  const names = new NameBook(root.fork("names"));
  const entities: Entity[] = [];
  const byId = new Map<string, Entity>();
  const twinOf = new Map<string, string>();
  const byType = new Map<EntityType, Entity[]>();
  const byGroup = new Map<number, Entity[]>();
  const push = <K, V>(map: Map<K, V[]>, key: K, value: V) => {
    const list = map.get(key);
    if (list) list.push(value);
    else map.set(key, [value]);
  };

  const add = (type: EntityType, name: string, group: number, attrs: Entity["attrs"]): Entity => {
    const e: Entity = { id: `${type}:${byType.get(type)?.length ?? 0}`, type, name, group, attrs };
    entities.push(e);
    byId.set(e.id, e);
    push(byType, type, e);
    push(byGroup, group, e);
    return e;
  };
  /** A fresh name, or now and then a near-duplicate of an earlier entity of the same type. */
  const nameFor = (rng: Rng, type: EntityType, part: (name: string) => number, fresh: () => string) => {
    const earlier = byType.get(type) ?? [];
    if (earlier.length > 0 && rng.chance(NEAR_DUPLICATE_RATE[type] ?? 0)) {
      const original = rng.pick(earlier);
      const dup = names.nearDuplicate(original.name, part(original.name));
      if (dup) return { name: dup, twin: original.id };
    }
    return { name: fresh(), twin: null };
  };

  for (let g = 0; g < cfg.groups; g++) {
    const rng = root.fork(`group:${g}`);
    const country = add("country", names.country(), g, {
      independence: rng.int(1700, 1950),
      population: rng.int(800, 60_000) * 1000 + rng.int(0, 999),
    });

    const cities: Entity[] = [];
    for (let i = 0; i < cfg.perGroup.cities; i++) {
      const { name, twin } = nameFor(
        rng,
        "city",
        () => 0,
        () => names.place(),
      );
      const city = add("city", name, g, {
        country: country.id,
        founded: rng.int(1000, 1750),
        population: rng.int(5_000, 2_500_000),
      });
      if (twin) twinOf.set(city.id, twin);
      cities.push(city);
    }
    const largest = cities.reduce((a, b) =>
      Number(b.attrs.population) > Number(a.attrs.population) ? b : a,
    );
    country.attrs.capital = largest.id;

    const people: Entity[] = [];
    for (let i = 0; i < cfg.perGroup.people; i++) {
      const { name, twin } = nameFor(
        rng,
        "person",
        (n) => n.split(" ").length - 1,
        () => names.person(),
      );
      const person = add("person", name, g, {
        birthYear: rng.int(1760, 1930),
        birthplace: rng.pick(cities).id,
        occupation: rng.pick(OCCUPATIONS),
      });
      if (twin) twinOf.set(person.id, twin);
      people.push(person);
    }
    for (const p of people) {
      const born = Number(p.attrs.birthYear);
      const elders = people.filter((q) => {
        const gap = born - Number(q.attrs.birthYear);
        return gap >= 15 && gap <= 45;
      });
      if (elders.length && rng.chance(0.75)) p.attrs.mentor = rng.pick(elders).id;
    }

    const orgs: Entity[] = [];
    for (let i = 0; i < cfg.perGroup.organizations; i++) {
      const founder = rng.pick(people);
      const hq = rng.pick(cities);
      let kind = "";
      const { name, twin } = nameFor(
        rng,
        "organization",
        () => 0,
        () => {
          // Named after its founder now and then, else after a district that is no entity of its own,
          // so a name never gives away where the organization is.
          const namesake = rng.chance(0.3) ? founder.name.split(" ").at(-1)! : names.place();
          const made = names.organization(namesake);
          kind = made.kind;
          return made.name;
        },
      );
      const org = add("organization", name, g, {
        kind: kind || orgKindOf(name),
        founded: Math.min(LAST_YEAR - 5, Number(founder.attrs.birthYear) + rng.int(25, 60)),
        founder: founder.id,
        hq: hq.id,
        members: rng.int(40, 90_000),
      });
      if (twin) twinOf.set(org.id, twin);
      orgs.push(org);
    }

    for (let i = 0; i < cfg.perGroup.works; i++) {
      const author = rng.pick(people);
      add("work", names.work(names.place()), g, {
        kind: rng.pick(WORK_KINDS),
        author: author.id,
        year: Math.min(LAST_YEAR, Number(author.attrs.birthYear) + rng.int(20, 70)),
        pages: rng.int(80, 1400),
      });
    }

    for (let i = 0; i < cfg.perGroup.events; i++) {
      const organizer = rng.pick(orgs);
      const location = rng.pick(cities);
      add("event", names.event(names.place()), g, {
        year: Math.min(LAST_YEAR, Number(organizer.attrs.founded) + rng.int(1, 80)),
        location: location.id,
        organizer: organizer.id,
        attendance: rng.int(200, 250_000),
      });
    }
  }

  const distractors = root.fork("distractors");
  const minorSources: MinorSource[] = [];
  const newsEvents: string[] = [];
  for (const e of entities) {
    if (e.type === "event" && distractors.chance(NEWS_RATE)) newsEvents.push(e.id);
    if (e.type === "country" || !distractors.chance(MINOR_SOURCE_RATE)) continue;
    const attrs = (Object.keys(e.attrs) as Attr[]).filter(
      (a) => typeof e.attrs[a] === "number" || MISSTATED_RELATIONS.includes(a),
    );
    const site = distractors.pick(["fans", "fans", "fans", "blog", "forum"] as const);
    const claims: Claim[] = [];
    for (const attr of distractors
      .shuffle(attrs)
      .slice(0, site === "fans" && distractors.chance(0.5) ? 2 : 1)) {
      const right = e.attrs[attr]!;
      if (typeof right === "number") {
        claims.push({ attr, wrong: wrongValue(distractors, attr, right) });
        continue;
      }
      const type = byId.get(right)!.type;
      const others = byGroup.get(e.group)!.filter((o) => o.type === type && o.id !== right && o.id !== e.id);
      if (others.length) claims.push({ attr, wrong: distractors.pick(others).id });
    }
    if (claims.length) minorSources.push({ entityId: e.id, site, claims });
  }

  const heldOutGroups = root
    .fork("held-out")
    .shuffle([...Array(cfg.groups).keys()])
    .slice(0, cfg.heldOut)
    .sort((a, b) => a - b);
  const nearNames = new Map<string, string[]>();
  for (const [twin, original] of twinOf) {
    push(nearNames, twin, original);
    push(nearNames, original, twin);
  }
  const minorSourcesOf = new Map<string, MinorSource[]>();
  for (const m of minorSources) push(minorSourcesOf, m.entityId, m);
  const capitalOf = new Map(
    (byType.get("country") ?? []).map((c) => [String(c.attrs.capital), c.id] as [string, string]),
  );
  return {
    seed,
    size,
    entities,
    byId,
    heldOutGroups,
    twinOf,
    nearNames,
    minorSources,
    minorSourcesOf,
    capitalOf,
    newsEvents,
  };
}

/** A plausible wrong value: a year off by a little, a count off by a tenth or so. */
function wrongValue(rng: Rng, attr: Attr, right: number): number {
  if (["birthYear", "founded", "year", "independence"].includes(attr)) {
    return right + rng.pick([-3, -2, -1, 1, 2, 3]);
  }
  const off = Math.max(1, Math.round(right * rng.int(5, 20) * 0.01));
  return right + (rng.chance(0.5) ? off : -off);
}

/** A near-duplicate organization keeps the kind word at the end of its name, so it keeps the kind too. */
function orgKindOf(name: string): string {
  const last = name.split(" ").at(-1);
  return ORG_KINDS.find(([word]) => word === last)?.[1] ?? "organization";
}
