import { describe, expect, it } from "vitest";
import { outputsMatch } from "./code-output.js";

describe("LiveCodeBench output comparison", () => {
  it.each([
    ["17\n", "17\n", true],
    ["17", "17\n", true], // the whole output is stripped
    ["  17  \n\n\n", "17\n", true], // and every line
    ["1 2 3 \n4\n", "1 2 3\n4\n", true],
    ["1.50\n", "1.5\n", true], // decimals compare by value, exactly
    ["-0\n", "0\n", true],
    ["1e3\n", "1000\n", true],
    ["6.064495102245980\n", "6.06449510224597979401\n", false], // no tolerance, as in LiveCodeBench
    ["12345678901234567891\n", "12345678901234567890\n", false], // beyond double precision
    ["1  2\n", "1 2\n", true], // numbers split on whitespace
    ["a  b\n", "a b\n", false], // but text is compared as is
    ["Yes\n", "yes\n", false],
    ["1\n2\n", "1\n", false],
    ["", "0\n", false],
  ])("%j vs %j → %s", (actual, expected, same) => {
    expect(outputsMatch(actual, expected)).toBe(same);
  });
});
