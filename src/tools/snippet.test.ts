import { describe, expect, it } from "vitest";
import { bestSnippet } from "./snippet.js";
import { termsOf } from "./terms.js";

const q = (query: string) => new Set(termsOf(query));

describe("termsOf", () => {
  it("lowercases, strips accents and possessives, drops stop words", () => {
    expect(termsOf("The Mayor of Zürich's town")).toEqual(["mayor", "zurich", "town"]);
  });
});

describe("bestSnippet", () => {
  const text =
    "Veltmoor is a river town in the province of Arden. It was founded in 1712 by salt traders. " +
    "The town's mayor is Ilse Brandt, elected in 2019. Veltmoor is known for its glass bridge.";

  it("picks the sentence covering the most query terms", () => {
    expect(bestSnippet(text, q("who is the mayor elected 2019"))).toBe(
      "The town's mayor is Ilse Brandt, elected in 2019. Veltmoor is known for its glass bridge.",
    );
    expect(bestSnippet(text, q("when was it founded")).startsWith("It was founded in 1712")).toBe(true);
  });

  it("falls back to the opening when nothing matches", () => {
    expect(bestSnippet(text, q("zebra")).startsWith("Veltmoor is a river town")).toBe(true);
  });

  it("cuts a long sentence to a window around the first match, on word boundaries", () => {
    const long = `${"filler words go here ".repeat(30)}the secret code is 4711 ${"and more words after it ".repeat(30)}`;
    const snippet = bestSnippet(long, q("secret code"), 120);
    expect(snippet.length).toBeLessThanOrEqual(120);
    expect(snippet).toContain("secret code is 4711");
    expect(snippet.startsWith("…")).toBe(true);
    expect(snippet.endsWith("…")).toBe(true);
  });
});
