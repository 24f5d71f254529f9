import { describe, expect, it } from "vitest";
import { articleTypes, type EntityType, generateWorld, type Task, type WorldDoc } from "../../tasks/index.js";
import { MemoryIndex } from "../../tools/index.js";
import {
  chainDrill,
  computeDrill,
  docText,
  factsDrill,
  lookupDrill,
  numberCopies,
  type PretrainDoc,
  searchDrill,
  worldDocuments,
} from "./drills.js";

const doc = (id: string, title: string, text: string): WorldDoc => ({
  id,
  title,
  text,
  url: `https://world.local/${id}`,
});
const holt = doc(
  "wiki/Varen_Holt",
  "Varen Holt",
  "Varen Holt (born 1852 in Tessmoor) was a cartographer. Holt studied under Ilsa Marrow.",
);
const marrow = doc(
  "wiki/Ilsa_Marrow",
  "Ilsa Marrow",
  "Ilsa Marrow was born in 1820 in Tessmoor and became a weaver. Little is known of Marrow's teachers.",
);
const tessmoor = doc(
  "wiki/Tessmoor",
  "Tessmoor",
  "Tessmoor is a city in Kudrakar, founded in 1331. It has a population of 1,329,412.",
);
const fanPage = doc(
  "fans/Varen_Holt",
  "Varen Holt",
  "Varen Holt was born in 1853. This fan page is kept by readers.",
);
const types = new Map<string, EntityType>([
  [holt.id, "person"],
  [marrow.id, "person"],
  [tessmoor.id, "city"],
]);
const articles = new Map([holt, marrow, tessmoor].map((d) => [d.id, d]));

const task = (kind: Task["kind"], question: string, answer: string, steps: unknown[]): Task => ({
  id: question,
  question,
  answers: [answer],
  kind,
  source: "world",
  meta: { plan: { steps } },
});
const mentorsBirthplace = task("multihop", "In which city was the mentor of Varen Holt born?", "Tessmoor", [
  { op: "lookup", subject: "Varen Holt", type: "person", attr: "mentor" },
  { op: "lookup", subject: { ref: 0 }, type: "person", attr: "birthplace" },
]);
const yearsBetween = task(
  "arithmetic",
  "How many years passed between the founding of Tessmoor and the birth of Varen Holt?",
  "521",
  [
    { op: "lookup", subject: "Tessmoor", type: "city", attr: "founded" },
    { op: "lookup", subject: "Varen Holt", type: "person", attr: "birthYear" },
    { op: "compute", fn: "abs_difference", args: [{ ref: 0 }, { ref: 1 }] },
  ],
);
const modpow = task("computation", "What is 3^5 mod 7?", "5", [
  { op: "program", name: "modpow", params: { b: 3, e: 5, m: 7 } },
]);

const copied = (d: PretrainDoc | null) => d?.parts.filter((p) => p.copy).map((p) => p.text);

describe("lookupDrill", () => {
  it("asks for the first name the question's plan looks up, copied from the question", () => {
    const drill = lookupDrill(mentorsBirthplace)!;
    expect(docText(drill)).toBe(
      "Question: In which city was the mentor of Varen Holt born?\nLookup: Varen Holt\n",
    );
    expect(copied(drill)).toEqual([" Varen Holt"]);
  });

  it("skips a question with nothing to look up", () => {
    expect(lookupDrill(modpow)).toBeNull();
  });
});

describe("chainDrill", () => {
  it("follows the plan through the articles, copying each next subject out of what was found", () => {
    const drill = chainDrill(mentorsBirthplace, articles)!;
    expect(docText(drill)).toBe(
      [
        "Question: In which city was the mentor of Varen Holt born?",
        "Lookup: Varen Holt",
        `Found: ${holt.text}`,
        "Lookup: Ilsa Marrow",
        `Found: ${marrow.text}`,
        "Answer: Tessmoor",
        "",
      ].join("\n"),
    );
    expect(copied(drill)).toEqual([" Varen Holt", " Ilsa Marrow", " Tessmoor"]);
  });

  it("leaves out a computed answer, which is never read anywhere", () => {
    const text = docText(chainDrill(yearsBetween, articles)!);
    expect(text).toContain("Lookup: Tessmoor\nFound: Tessmoor is a city");
    expect(text).toContain("Lookup: Varen Holt\n");
    expect(text).not.toContain("Answer");
  });

  it("gives up on a chain it cannot follow", () => {
    expect(chainDrill(mentorsBirthplace, new Map([[holt.id, holt]]))).toBeNull();
    expect(chainDrill(modpow, articles)).toBeNull();
  });
});

describe("searchDrill", () => {
  const index = new MemoryIndex([holt, marrow, tessmoor, fanPage]);

  it("searches for each subject, shows the results, and reads the value from the subject's own article", () => {
    const drill = searchDrill(mentorsBirthplace, index)!;
    const text = docText(drill);
    // The fan page about Varen Holt is among the results; the value comes from the encyclopedia.
    expect(text).toContain(
      "Search: Varen Holt mentor\n1. Varen Holt (https://world.local/wiki/Varen_Holt)\n   Varen Holt (born 1852",
    );
    expect(text).toContain("(https://world.local/fans/Varen_Holt)");
    expect(text).toContain("Found: the mentor of Varen Holt is Ilsa Marrow\nSearch: Ilsa Marrow born\n");
    expect(text).toContain("Found: the birthplace of Ilsa Marrow is Tessmoor\nAnswer: Tessmoor\n");
    expect(copied(drill)).toEqual([" Varen Holt", " Ilsa Marrow", " Ilsa Marrow", " Tessmoor", " Tessmoor"]);
  });

  it("copies a count as the snippet writes it, and gives up when the subject's article is not found", () => {
    const population = task("multihop", "What is the population of Tessmoor?", "1329412", [
      { op: "lookup", subject: "Tessmoor", type: "city", attr: "population" },
    ]);
    expect(docText(searchDrill(population, index)!)).toContain(
      "Found: the population of Tessmoor is 1,329,412\nAnswer: 1,329,412\n",
    );
    expect(searchDrill(mentorsBirthplace, new MemoryIndex([holt, fanPage]))).toBeNull();
    expect(searchDrill(modpow, index)).toBeNull();
  });
});

describe("computeDrill", () => {
  const index = new MemoryIndex([holt, marrow, tessmoor, fanPage]);

  it("carries an arithmetic search drill through the teacher's code, its output and the answer", () => {
    const drill = computeDrill(yearsBetween, index)!;
    const text = docText(drill);
    expect(text).toContain("Found: the founding year of Tessmoor is 1331\nSearch: Varen Holt born\n");
    expect(
      text.endsWith(
        "Found: the birth year of Varen Holt is 1852\nCode:\nprint(abs(1331 - 1852))\nOutput: 521\nAnswer: 521\n",
      ),
    ).toBe(true);
    expect(copied(numberCopies(drill))).toEqual([" 1331", " 1852", "1331", "1852", " 521"]);
  });

  it("writes a count as the teacher does, without separators, and copies it so into the code", () => {
    const total = task("arithmetic", "What is the combined population of Tessmoor and Tessmoor?", "2658824", [
      { op: "lookup", subject: "Tessmoor", type: "city", attr: "population" },
      { op: "lookup", subject: "Tessmoor", type: "city", attr: "population" },
      { op: "compute", fn: "sum", args: [{ ref: 0 }, { ref: 1 }] },
    ]);
    const drill = computeDrill(total, index)!;
    expect(docText(drill)).toContain("Found: the population of Tessmoor is 1329412\n");
    expect(docText(drill)).toContain(
      "Code:\nvalues = [1329412, 1329412]\nprint(sum(values))\nOutput: 2658824\nAnswer: 2658824\n",
    );
    // The value read is a copy of the snippet's "1,329,412"; the code copies it twice.
    expect(copied(drill)?.filter((t) => t.includes("1329412"))).toHaveLength(4);
  });

  it("compares two values read and answers with the name that wins", () => {
    const earlier = task("comparison", "Who was born earlier: Varen Holt or Ilsa Marrow?", "Ilsa Marrow", [
      { op: "lookup", subject: "Varen Holt", type: "person", attr: "birthYear" },
      { op: "lookup", subject: "Ilsa Marrow", type: "person", attr: "birthYear" },
      { op: "compare", pick: "min", values: [{ ref: 0 }, { ref: 1 }], labels: ["Varen Holt", "Ilsa Marrow"] },
    ]);
    const drill = computeDrill(earlier, index)!;
    expect(docText(drill)).toContain(
      "Compare: Varen Holt: 1852; Ilsa Marrow: 1820. The smaller is Ilsa Marrow\nAnswer: Ilsa Marrow\n",
    );
    expect(copied(numberCopies(drill))).toEqual([" 1852", " 1820", " 1852", " 1820"]);
  });

  it("writes no drill for a question that only looks up, or whose worked answer is not the gold", () => {
    expect(computeDrill(mentorsBirthplace, index)).toBeNull();
    expect(computeDrill(modpow, index)).toBeNull();
    expect(computeDrill({ ...yearsBetween, answers: ["520"] }, index)).toBeNull();
  });
});

describe("factsDrill", () => {
  it("asks an article each fact it states; the answers are copied as the article writes them", () => {
    const drill = factsDrill(tessmoor, "city")!;
    const text = docText(drill);
    expect(text.startsWith(`Tessmoor\n${tessmoor.text}\n`)).toBe(true);
    expect(text).toContain("Q: What is the population of Tessmoor?\nA: 1,329,412\n");
    expect(text).toContain("Q: What is the country of Tessmoor?\nA: Kudrakar\n");
    expect(text).toContain("Q: What is the founding year of Tessmoor?\nA: 1331\n");
    expect(copied(drill)?.sort()).toEqual([" 1,329,412", " 1331", " Kudrakar"]);
  });
});

describe("worldDocuments", () => {
  it("sorts the corpus into articles and pages and writes every drill the world allows", () => {
    const docs = worldDocuments({
      corpus: [holt, marrow, tessmoor, fanPage],
      types,
      questions: [mentorsBirthplace, yearsBetween, modpow],
    });
    expect(docs.articles.map(docText)).toEqual(
      [holt, marrow, tessmoor].map((d) => `${d.title}\n${d.text}\n`),
    );
    expect(docs.pages.map(docText)).toEqual([`Varen Holt\n${fanPage.text}\n`]);
    expect(docs.lookup).toHaveLength(2);
    expect(docs.chain).toHaveLength(2);
    expect(docs.facts).toHaveLength(3);
    expect(docs.search).toHaveLength(2);
    expect(docs.compute).toHaveLength(1);
  });

  it("on a generated world: every copy is verbatim from earlier in its document, and most drills copy", () => {
    const world = generateWorld(5, "tiny");
    const docs = worldDocuments({
      corpus: world.corpus,
      types: articleTypes(5, "tiny"),
      questions: world.splits.train,
    });
    const lookups = world.splits.train.filter((t) => t.kind !== "computation").length;
    expect(docs.lookup.length).toBe(lookups);
    expect(docs.chain.length).toBeGreaterThan(0.9 * lookups);
    expect(docs.search.length).toBeGreaterThan(0.9 * lookups);
    const worked = world.splits.train.filter(
      (t) => t.kind === "arithmetic" || t.kind === "comparison",
    ).length;
    expect(docs.compute.length).toBeGreaterThan(0.9 * worked);
    for (const d of [...docs.lookup, ...docs.chain, ...docs.facts, ...docs.search, ...docs.compute]) {
      let before = "";
      for (const p of d.parts) {
        if (p.copy)
          expect(before.replace(/(\d),(?=\d{3})/g, "$1")).toContain(p.text.trim().replace(/,/g, ""));
        before += p.text;
      }
      expect(d.parts.some((p) => p.copy)).toBe(true);
    }
  });
});
