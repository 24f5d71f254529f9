import { capitalize } from "../../util/index.js";
import type { Rng } from "./prng.js";

// Invented names are built from these syllables and word lists (our own, chosen to read as names
// without naming real people or places).
const ONSETS = [
  "b",
  "br",
  "c",
  "d",
  "dr",
  "f",
  "g",
  "gr",
  "h",
  "k",
  "l",
  "m",
  "n",
  "p",
  "r",
  "s",
  "st",
  "t",
  "th",
  "tr",
  "v",
  "w",
  "z",
  "sh",
  "j",
  "qu",
  "y",
];
const VOWELS = ["a", "e", "i", "o", "u", "a", "e", "o", "ae", "ei", "ou", "y"];
const CODAS = ["", "", "n", "r", "l", "s", "th", "rn", "ld", "st", "x", "m", "nd", "k", "t", "ll"];
const PLACE_SUFFIXES = [
  "moor",
  "gate",
  "ford",
  "wick",
  "dale",
  "mere",
  "holm",
  "stead",
  "haven",
  "by",
  "ton",
  "brook",
  "vale",
];
const COUNTRY_SUFFIXES = ["ia", "ara", "and", "esh", "ovia", "enne", "ar", "ica", "une"];

export const OCCUPATIONS = [
  "cartographer",
  "astronomer",
  "engineer",
  "botanist",
  "chemist",
  "architect",
  "novelist",
  "poet",
  "historian",
  "physician",
  "mathematician",
  "surveyor",
  "printer",
  "glassmaker",
  "shipwright",
  "linguist",
  "geologist",
  "economist",
  "clockmaker",
  "composer",
];
const ORG_FIELDS = [
  "Survey",
  "Optical",
  "Maritime",
  "Botanical",
  "Engineering",
  "Printing",
  "Mining",
  "Textile",
  "Musical",
  "Medical",
  "Geographic",
  "Lantern",
  "Clockmaking",
  "Glass",
  "Rail",
  "Chemical",
  "Astronomical",
  "Weaving",
  "Archival",
  "Salt",
];
/** The word in an organization's name, and what its article calls it. */
export const ORG_KINDS: ReadonlyArray<readonly [string, string]> = [
  ["Society", "learned society"],
  ["Company", "trading company"],
  ["Institute", "research institute"],
  ["Guild", "guild"],
  ["Foundation", "charitable foundation"],
  ["Academy", "academy"],
  ["Trust", "trust"],
  ["Works", "manufacturer"],
  ["Union", "trade union"],
  ["Press", "publishing house"],
];
const TITLE_ADJECTIVES = [
  "Salt",
  "Quiet",
  "Iron",
  "Amber",
  "Hollow",
  "Northern",
  "Silent",
  "Distant",
  "Pale",
  "Crimson",
  "Winter",
  "Glass",
  "Copper",
  "Lesser",
  "Open",
  "Narrow",
  "Drowned",
  "Golden",
  "Bitter",
  "Seventh",
  "Hidden",
  "Last",
];
const TITLE_NOUNS = [
  "Roads",
  "Harbor",
  "Lantern",
  "Orchard",
  "Ledger",
  "Tide",
  "Compass",
  "Meridian",
  "Archive",
  "Garden",
  "Bell",
  "River",
  "Orbit",
  "Chorus",
  "Mirror",
  "Furnace",
  "Tower",
  "Causeway",
  "Almanac",
  "Shore",
  "Engine",
  "Map",
  "Season",
  "Quarry",
];
export const WORK_KINDS = [
  "novel",
  "treatise",
  "atlas",
  "memoir",
  "survey",
  "handbook",
  "essay collection",
  "poetry collection",
  "chronicle",
  "field guide",
];
const EVENT_THEMES = [
  "Lantern",
  "Harvest",
  "Maritime",
  "Clockwork",
  "Glass",
  "Mapmakers",
  "Astronomers",
  "Weavers",
  "River",
  "Printing",
  "Salt",
  "Winter",
  "Spring",
  "Engineers",
  "Botanists",
];
const EVENT_KINDS = [
  "Fair",
  "Congress",
  "Exhibition",
  "Festival",
  "Summit",
  "Regatta",
  "Symposium",
  "Assembly",
];

function syllable(rng: Rng, coda = true): string {
  return rng.pick(ONSETS) + rng.pick(VOWELS) + (coda ? rng.pick(CODAS) : "");
}

// Common English words (search engines drop many as stop words) and names we do not want to coin.
const TAKEN_WORDS = new Set(
  (
    "than that then there these they this were what when where which whom will been being also after " +
    "before over under with your does very could would should about from have into their them were " +
    "here more most some such only other each both same just once upon bath bell band bond born bore " +
    "dust gold iron mars moon rome sand tide vale wall ward yard narnia"
  ).split(" "),
);

function word(rng: Rng, syllables: number): string {
  for (;;) {
    let w = "";
    for (let i = 0; i < syllables; i++) w += syllable(rng, i === syllables - 1 || rng.chance(0.3));
    if (w.length >= 3 && !TAKEN_WORDS.has(w)) return capitalize(w);
  }
}

/** Draws names until one is new: every title in the world is unique. */
export class NameBook {
  private readonly used = new Set<string>();
  readonly firstNames: string[];

  constructor(private readonly rng: Rng) {
    const firsts = new Set<string>();
    while (firsts.size < 60) {
      const w = word(rng, 2);
      if (w.length >= 4 && w.length <= 7) firsts.add(w);
    }
    this.firstNames = [...firsts];
  }

  /** Claims `name` if it is free; returns whether it was. */
  claim(name: string): boolean {
    const key = name.toLowerCase();
    if (this.used.has(key)) return false;
    this.used.add(key);
    return true;
  }

  private fresh(make: () => string): string {
    for (;;) {
      const name = make();
      if (this.claim(name)) return name;
    }
  }

  person(): string {
    return this.fresh(() => {
      const surname = word(this.rng, this.rng.chance(0.6) ? 1 : 2);
      return `${this.rng.pick(this.firstNames)} ${surname}`;
    });
  }

  place(): string {
    return this.fresh(() => {
      const root = word(this.rng, this.rng.chance(0.5) ? 1 : 2);
      if (this.rng.chance(0.08)) return `Port ${root}`;
      return this.rng.chance(0.6) ? root + this.rng.pick(PLACE_SUFFIXES) : root;
    });
  }

  country(): string {
    return this.fresh(() => {
      const root = word(this.rng, this.rng.chance(0.5) ? 1 : 2).replace(/[aeiouy]+$/, "");
      return root + this.rng.pick(COUNTRY_SUFFIXES);
    });
  }

  /** An organization named after a place or person of its group, e.g. "Tessmoor Optical Guild". */
  organization(namesake: string): { name: string; kind: string } {
    let kind = "";
    const name = this.fresh(() => {
      const [word, description] = this.rng.pick(ORG_KINDS);
      kind = description;
      return `${namesake} ${this.rng.pick(ORG_FIELDS)} ${word}`;
    });
    return { name, kind };
  }

  work(place: string): string {
    return this.fresh(() => {
      const adj = this.rng.pick(TITLE_ADJECTIVES);
      const noun = this.rng.pick(TITLE_NOUNS);
      switch (this.rng.int(0, 3)) {
        case 0:
          return `The ${adj} ${noun}`;
        case 1:
          return `${noun} of ${place}`;
        case 2:
          return `The ${noun} at ${place}`;
        default:
          return `${adj} ${noun}`;
      }
    });
  }

  event(place: string): string {
    return this.fresh(() => `${place} ${this.rng.pick(EVENT_THEMES)} ${this.rng.pick(EVENT_KINDS)}`);
  }

  /**
   * A near-duplicate of `name`: one letter of its `part`-th word changed ("Varen Holt" -> "Varen Hold"),
   * or null when every variant is taken.
   */
  nearDuplicate(name: string, part: number): string | null {
    const words = name.split(" ");
    const target = words[part];
    for (let tries = 0; tries < 20; tries++) {
      const mutated = mutate(this.rng, target);
      if (mutated === target || TAKEN_WORDS.has(mutated.toLowerCase())) continue;
      const candidate = [...words.slice(0, part), mutated, ...words.slice(part + 1)].join(" ");
      if (this.claim(candidate)) return candidate;
    }
    return null;
  }
}

const SWAPS: Record<string, string[]> = {
  t: ["d"],
  d: ["t"],
  n: ["m"],
  m: ["n"],
  s: ["z"],
  r: ["l"],
  l: ["r"],
  k: ["c"],
  c: ["k"],
  e: ["a", "i"],
  a: ["e", "o"],
  o: ["u", "a"],
  i: ["y", "e"],
  u: ["o"],
  y: ["i"],
};

/** Changes one letter, preferring the end of the word where readers skim. */
function mutate(rng: Rng, w: string): string {
  const positions = [...w].map((ch, i) => (SWAPS[ch] && i > 0 ? i : -1)).filter((i) => i >= 0);
  if (positions.length === 0) return w;
  const late = positions.filter((i) => i >= w.length - 3);
  const i = rng.pick(late.length && rng.chance(0.7) ? late : positions);
  return w.slice(0, i) + rng.pick(SWAPS[w[i]]) + w.slice(i + 1);
}

export function indefinite(noun: string): string {
  return /^[aeiou]/i.test(noun) ? `an ${noun}` : `a ${noun}`;
}
