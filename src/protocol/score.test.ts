import { describe, expect, it } from "vitest";
import { parseScore } from "./score.js";

describe("parseScore", () => {
  it.each([
    ["Checked both sources. Score: 4", 4],
    ["score 4/5", 4],
    ["**Score**: 2", 2],
    ["The score is 5.", 5],
    ["Score = 3", 3],
    ["I'd give it 3/5", 3],
    ["4 out of 5", 4],
    ["Score: 3 out of 5", 3],
    ["Matches the page. 4", 4],
    ["Score: 2\nOn reflection the date is right. Score: 5", 5],
    ["Page says 1990, answer says 1990. Score: 1", 1],
  ])("%j -> %d", (text, score) => {
    expect(parseScore(text)).toBe(score);
  });

  it.each(["looks fine", "Score: 0", "Score: 7", "Score: 10", "Score: 4.5", "It was founded in 1995", ""])(
    "%j -> null",
    (text) => {
      expect(parseScore(text)).toBeNull();
    },
  );
});

describe("parseScore on AFM's 1-4 scale", () => {
  it.each([
    ["The suggested answer matches every source. Score: 4", 4],
    ["mostly correct, 3 out of 4", 3],
    ["score 2/4", 2],
  ])("%j -> %d", (text, score) => {
    expect(parseScore(text, 4)).toBe(score);
  });

  it.each(["Score: 5", "4 out of 5 would be generous"])("%j -> null", (text) => {
    expect(parseScore(text, 4)).toBeNull();
  });
});
