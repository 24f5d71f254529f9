import { describe, expect, it } from "vitest";
import { copyAccuracy, copyTargets } from "./copy.js";

// Metas as `coa world generate --seed 5 --size small --max-hops 2` writes them (test split).
const chain = {
  supportingDocs: ["wiki/Lougoul_Zimest", "wiki/Brodrouxby"],
  plan: {
    steps: [
      { op: "lookup", subject: "Lougoul Zimest", type: "person", attr: "birthplace" },
      { op: "lookup", subject: { ref: 0 }, type: "city", attr: "country" },
    ],
  },
};
const comparison = {
  supportingDocs: ["wiki/The_Lantern_at_Veceingate", "wiki/Distant_Tide"],
  plan: {
    steps: [
      { op: "lookup", subject: "The Lantern at Veceingate", type: "work", attr: "year" },
      { op: "lookup", subject: "Distant Tide", type: "work", attr: "year" },
      { op: "compare", pick: "max", values: [{ ref: 0 }, { ref: 1 }], labels: ["x", "y"] },
    ],
  },
};
const program = {
  supportingDocs: [],
  plan: { steps: [{ op: "program", name: "fib_mod", params: { n: 3015, m: 32034 } }] },
};

describe("copyTargets", () => {
  it("reads the question's entity, and the first lookup's value when the second lookup is about it", () => {
    expect(copyTargets({ meta: chain })).toEqual({ entity: "Lougoul Zimest", value: "Brodrouxby" });
    // Two names from the question: nothing is carried from the first lookup into the second.
    expect(copyTargets({ meta: comparison })).toEqual({ entity: "The Lantern at Veceingate", value: null });
  });

  it("asks nothing of tasks without a plan or without a lookup", () => {
    expect(copyTargets({ meta: program })).toEqual({ entity: null, value: null });
    expect(copyTargets({ meta: {} })).toEqual({ entity: null, value: null });
  });
});

describe("copyAccuracy", () => {
  const targets = copyTargets({ meta: chain });
  it("counts verbatim copies into the first and second tool calls; a missing call is a miss", () => {
    const acc = copyAccuracy([
      { targets, toolArgs: ["Lougoul Zimest birthplace", "Brodrouxby country"] },
      // Near misses are misses: one letter off finds another article.
      { targets, toolArgs: ["Lougoul Zimst", "brodrouxby"] },
      { targets, toolArgs: ["Zaton Stat", "https://world.local/wiki/Lougoul_Zimest", "Brodrouxby"] },
      { targets, toolArgs: [] },
      { targets: { entity: null, value: null }, toolArgs: ["anything"] },
    ]);
    expect(acc.entity).toEqual({ episodes: 4, copied: 1, rate: 0.25 });
    expect(acc.value).toEqual({ episodes: 4, copied: 1, rate: 0.25 });
  });

  it("has no rate when no episode asks for a copy", () => {
    expect(copyAccuracy([]).entity).toEqual({ episodes: 0, copied: 0, rate: null });
  });
});
