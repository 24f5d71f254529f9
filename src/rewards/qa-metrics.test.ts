import { describe, expect, it } from "vitest";
import { exactMatch, expandGolds, hotpotF1, normalizeAnswer, qaScores, squadF1 } from "./qa-metrics.js";

/**
 * Tricky cases with the numbers the official SQuAD v1.1 and HotpotQA evaluation definitions give
 * (normalize: lower → drop string.punctuation → drop \b(a|an|the)\b → " ".join(split()); F1 over the
 * token multiset; HotpotQA zeroes F1 when yes/no/noanswer meets anything else). Each number was worked
 * out by hand from those definitions and cross-checked by running them under Python 3.
 * Columns: prediction, golds, EM, SQuAD F1, HotpotQA F1.
 */
const CASES: [string, string[], number, number, number][] = [
  // articles and punctuation
  ["The Eiffel Tower", ["Eiffel Tower"], 1, 1, 1],
  ["the theater", ["theater"], 1, 1, 1], // "the" inside "theater" is not an article
  ["Anne", ["anne"], 1, 1, 1],
  ["an_the", ["anthe"], 1, 1, 1], // "_" is punctuation, removed before articles are looked for
  ["Paris, France.", ["paris france"], 1, 1, 1],
  ["U.S.A.", ["USA"], 1, 1, 1],
  ["1,000", ["1000"], 1, 1, 1],
  ["New-York", ["New York"], 0, 0, 0], // the hyphen is deleted, not turned into a space
  // empty strings: EM compares "" with "", F1 of no tokens is 0 in v1.1
  ["a an the", [""], 1, 0, 0],
  ["A", ["a"], 1, 0, 0],
  ["", ["Paris"], 0, 0, 0],
  // unicode: only ASCII punctuation goes, nothing is NFKC/NFC-normalized or accent-folded
  ["\u201cHello\u201d", ["hello"], 0, 0, 0], // curly quotes stay
  ["Rock\u2019n\u2019roll", ["rock n roll"], 0, 0, 0],
  ["1914\u20141918", ["1914 1918"], 0, 0, 0], // an em dash joins one token
  ["Paris\uff01", ["Paris"], 0, 0, 0], // fullwidth "!" is not string.punctuation
  ["Wilhelm Conrad R\u00f6ntgen", ["Wilhelm Conrad Rontgen"], 0, 2 / 3, 2 / 3],
  ["R\u00f6ntgen", ["Ro\u0308ntgen"], 0, 0, 0], // composed vs decomposed ö
  ["caf\u00e9 \u00e0 la carte", ["cafe a la carte"], 0, 4 / 7, 4 / 7],
  ["\u0130stanbul", ["istanbul"], 0, 0, 0], // İ lowercases to i + combining dot
  ["\u039f\u0394\u039f\u03a3", ["\u03bf\u03b4\u03bf\u03c2"], 1, 1, 1], // final sigma
  // Python's word boundary is Unicode-aware: "a" after "Ç" is part of a word, not an article
  ["\u00c7a", ["\u00e7"], 0, 0, 0],
  ["\u00e9the", ["\u00e9"], 0, 0, 0],
  // Python's str.split() whitespace: NBSP and \x1c split, ZWSP and BOM do not
  ["New\u00a0York", ["new york"], 1, 1, 1],
  ["\u001cParis", ["paris"], 1, 1, 1],
  ["New\u200bYork", ["new york"], 0, 0, 0],
  ["\ufeffParis", ["paris"], 0, 0, 0],
  // token multisets and partial overlap
  ["the the cat cat cat", ["cat"], 0, 0.5, 0.5],
  ["the big red apple", ["red apple pie"], 0, 2 / 3, 2 / 3],
  // several golds: the best one counts
  ["Tchaikovsky", ["Pyotr Ilyich Tchaikovsky", "Tchaikovsky"], 1, 1, 1],
  ["Tchaikovsky", ["Pyotr Ilyich Tchaikovsky"], 0, 0.5, 0.5],
  // HotpotQA's special answers
  ["yes", ["yes it is"], 0, 0.5, 0],
  ["no", ["no way"], 0, 2 / 3, 0],
  ["Yes.", ["yes"], 1, 1, 1],
  ["noanswer", ["no answer"], 0, 0, 0],
];

describe("EM and F1 against the official definitions", () => {
  it.each(CASES)("%j vs %j → EM %d, F1 %d, HotpotQA F1 %d", (prediction, golds, em, f1, hotpot) => {
    const squad = qaScores(prediction, golds, "squad");
    expect(squad.em).toBe(em);
    expect(squad.f1).toBeCloseTo(f1, 12);
    expect(qaScores(prediction, golds, "hotpot").f1).toBeCloseTo(hotpot, 12);
  });

  it("normalizes step by step as the official scripts do", () => {
    expect(normalizeAnswer("  The  QUICK, brown fox's den!  ")).toBe("quick brown foxs den");
    expect(normalizeAnswer("a.k.a. the man")).toBe("aka man");
    expect(normalizeAnswer("An apple a day")).toBe("apple day");
  });

  it("pairs single metrics as the official functions (one gold each)", () => {
    expect(exactMatch("The Beatles", "beatles")).toBe(1);
    expect(squadF1("yes", "yes indeed")).toBeCloseTo(2 / 3, 12);
    expect(hotpotF1("yes", "yes indeed")).toBe(0);
  });
});

describe("|-separated golds", () => {
  it("splits each gold string into alternatives", () => {
    expect(expandGolds(["NYC|New York City", "Big Apple"])).toEqual(["NYC", "New York City", "Big Apple"]);
    expect(qaScores("new york city", ["NYC|New York City"])).toEqual({ em: 1, f1: 1 });
  });

  it("without the split, SQuAD normalization would glue the alternatives together", () => {
    expect(normalizeAnswer("NYC|New York City")).toBe("nycnew york city");
  });

  it("drops empty alternatives but keeps an all-empty gold", () => {
    expect(expandGolds(["a||b|"])).toEqual(["a", "b"]);
    expect(expandGolds([""])).toEqual([""]);
    expect(qaScores("anything", [])).toEqual({ em: 0, f1: 0 });
  });
});
