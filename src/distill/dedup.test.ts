import { describe, expect, it } from "vitest";
import { DistillConfig } from "./config.js";
import { findNearDuplicates, jaccard, minhash, shingles } from "./dedup.js";

const opts = DistillConfig.parse({}).dedup;

describe("shingles and jaccard", () => {
  it("ignores case, punctuation and accents", () => {
    expect(shingles("Who founded Acme, Inc.?", 3)).toEqual(shingles("who FOUNDED acme inc", 3));
    expect(shingles("Café Zürich", 1)).toEqual(new Set(["cafe", "zurich"]));
  });

  it("treats a text shorter than the shingle as one shingle", () => {
    expect(shingles("Who won?", 3)).toEqual(new Set(["who won"]));
  });

  it("estimates Jaccard similarity from MinHash signatures", () => {
    const a = shingles("the quick brown fox jumps over the lazy dog near the old river bank today", 2);
    const b = shingles("the quick brown fox jumps over the lazy cat near the old river bank today", 2);
    const [sa, sb] = [minhash(a, 256), minhash(b, 256)];
    const agree = sa.filter((v, i) => v === sb[i]).length / 256;
    expect(Math.abs(agree - jaccard(a, b))).toBeLessThan(0.12);
  });
});

describe("findNearDuplicates", () => {
  it("catches reworded copies and keeps the first of each group", () => {
    const q = [
      "In which city was the founder of the company that built the Orion bridge born?",
      "Who directed the film that won the Golden Reel award in 1987?",
      "In which city was the founder of the company that built the Orion bridge born ?!",
      "in which city was the founder of the company that built the orion bridge born, exactly?",
      "Who directed the film that won the Golden Reel award in 1987?",
    ];
    const dups = findNearDuplicates(q, opts);
    expect(dups.map((d) => d?.of ?? null)).toEqual([null, null, 0, 0, 1]);
    expect(dups[2]!.similarity).toBe(1);
    expect(dups[3]!.similarity).toBeGreaterThanOrEqual(0.8);
  });

  it("keeps questions that share a template but ask about different things", () => {
    const q = [
      "In which city was the founder of Acme Robotics born?",
      "In which city was the founder of Zeta Labs born?",
      "How many employees did Acme Robotics have in 2001?",
    ];
    expect(findNearDuplicates(q, opts)).toEqual([null, null, null]);
  });

  it("finds a copy among many questions from one template without flagging the others", () => {
    const q = Array.from(
      { length: 1000 },
      (_, i) => `What is the population of city number ${i} in region ${i % 7}?`,
    );
    q.push(q[567]!.toUpperCase());
    const dups = findNearDuplicates(q, opts);
    expect(dups.slice(0, -1).every((d) => d === null)).toBe(true);
    expect(dups.at(-1)?.of).toBe(567);
  });
});
