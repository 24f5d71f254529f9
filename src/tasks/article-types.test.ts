import { describe, expect, it } from "vitest";
import { articleTypes } from "./article-types.js";
import { generateWorld, readFact } from "./index.js";

describe("articleTypes", () => {
  it("names the type of every encyclopedia article, so its facts can be read", () => {
    const world = generateWorld(3, "tiny");
    const types = articleTypes(3, "tiny");
    const articles = world.corpus.filter((d) => d.id.startsWith("wiki/"));
    expect(articles.length).toBe(types.size);
    for (const doc of articles) expect(types.has(doc.id), doc.id).toBe(true);
    const person = articles.find((d) => types.get(d.id) === "person")!;
    expect(readFact("person", "birthYear", person.text)).toMatch(/^\d{4}$/);
  });
});
