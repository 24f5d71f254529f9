import { existsSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { lastBoxed } from "../protocol/index.js";
import { loadTasks } from "../tasks/index.js";
import { evalLatexNumber } from "./latex-eval.js";
import { normalizeMath } from "./latex-normalize.js";
import { extractMathAnswer, mathEquivalent } from "./math-equivalence.js";

const BENCHMARKS = fileURLToPath(new URL("../../../shared/benchmarks/", import.meta.url));
const present = existsSync(BENCHMARKS);
if (!present) console.warn(`math benchmark tests skipped: ${BENCHMARKS} not found`);

describe("\\boxed extraction", () => {
  it("takes the last box, with nested braces", () => {
    expect(lastBoxed("first \\boxed{1}, then \\boxed{\\frac{\\sqrt{3}}{2}} done")).toBe(
      "\\frac{\\sqrt{3}}{2}",
    );
    expect(lastBoxed("\\boxed 5$")).toBe("5");
    expect(lastBoxed("\\fbox{x}")).toBe("x");
    expect(lastBoxed("\\boxed{\\{1,2\\}}")).toBe("\\{1,2\\}");
    expect(lastBoxed("no box here")).toBeNull();
    expect(lastBoxed("unclosed \\boxed{12")).toBeNull();
    expect(extractMathAnswer("The answer is 7.")).toBe("The answer is 7.");
  });
});

describe("LaTeX normalization", () => {
  it.each([
    ["\\left( 3, \\frac{\\pi}{2} \\right)", "(3,\\frac{\\pi}{2})"],
    ["\\dfrac{17}{50}", "\\frac{17}{50}"],
    ["\\frac 59", "\\frac{5}{9}"],
    ["\\frac9{19}", "\\frac{9}{19}"],
    ["11\\sqrt2", "11\\sqrt{2}"],
    ["90^\\circ", "90"],
    ["\\$32,\\!348", "32348"],
    ["11,\\! 111,\\! 111,\\! 100", "11111111100"],
    ["5.4 \\text{ cents}", "5.4"],
    ["864 \\mbox{ inches}^2", "864"],
    ["\\frac{270}7\\text{ degrees}", "\\frac{270}{7}"],
    ["\\text{(C)}", "C"],
    ["\\text{Evelyn}", "evelyn"],
    ["x=5", "5"],
    ["x \\in [-2,7]", "[-2,7]"],
    ["4210_{5}", "4210_5"],
    ["50\\%", "50"],
    ["5x - 7y + 11z + 4 = 0", "5x-7y+11z+4=0"],
  ])("%s → %s", (raw, normalized) => {
    expect(normalizeMath(raw)).toBe(normalized);
  });
});

describe("numeric value", () => {
  it.each([
    ["025", 25],
    [".0000672", 0.0000672],
    ["\\frac{3\\sqrt{3}}{4}", (3 * Math.sqrt(3)) / 4],
    ["-\\frac{\\pi}{6}", -Math.PI / 6],
    ["1\\frac{4}{5}", 1.8],
    ["288\\pi", 288 * Math.PI],
    ["2^{10}", 1024],
    ["(1+2)(3+4)", 21],
  ])("%s = %d", (text, value) => {
    expect(evalLatexNumber(text)).toBeCloseTo(value, 9);
  });

  it("gives null for anything that is not a plain number", () => {
    for (const text of [
      "6-5i",
      "x^2",
      "\\infty",
      "(3,4]",
      "1\\pm\\sqrt{5}",
      "\\frac{1}{0}",
      "\\sqrt{-1}",
      "2k+2",
    ]) {
      expect(evalLatexNumber(text)).toBeNull();
    }
  });
});

describe("math equivalence", () => {
  it.each<[string, string, boolean]>([
    ["\\boxed{\\frac{1}{2}}", "0.5", true],
    ["\\boxed{1/2}", "\\frac12", true],
    ["\\boxed{25}", "025", true],
    ["10080", "10,\\!080", true],
    ["0.34", "\\dfrac{17}{50}", true],
    ["\\boxed{90}", "90^\\circ", true],
    ["\\boxed{1.8}", "1\\frac{4}{5}", true],
    ["$\\boxed{11\\sqrt{2}}$", "11\\sqrt2", true],
    ["\\boxed{\\pi/2}", "\\frac{\\pi}{2}", true],
    ["\\boxed{(3, \\pi/2)}", "\\left( 3, \\frac{\\pi}{2} \\right)", true],
    ["\\boxed{C}", "\\text{(C)}", true],
    ["\\boxed{7, 5, 3}", "3, 5, 7", true],
    [
      "\\boxed{\\begin{pmatrix}-1/3\\\\0.6666667\\\\5/3\\end{pmatrix}}",
      "\\begin{pmatrix} -1/3 \\\\ 2/3 \\\\ 5/3 \\end{pmatrix}",
      true,
    ],
    ["\\boxed{(-\\infty,2)\\cup(3,\\infty)}", "(-\\infty, 2) \\cup (3, \\infty)", true],
    ["\\boxed{\\{-2,1\\pm\\sqrt{5}\\}}", "\\{1\\pm\\sqrt{5},-2\\}", true],
    ["\\boxed{18.9}", "\\$18.90", true],
    ["\\boxed{0.333333333}", "\\frac{1}{3}", true],
    ["\\boxed{2}", "3", false],
    ["\\boxed{0.33}", "\\frac{1}{3}", false],
    ["\\boxed{(3,4)}", "(3,4]", false],
    ["\\boxed{(1,2)}", "(2,1)", false],
    ["\\boxed{6+5i}", "6 - 5i", false],
    ["\\boxed{\\sqrt{2}}", "2", false],
    ["\\boxed{}", "0", false],
    ["\\boxed{x^2+1}", "x^2-1", false],
  ])("%s vs %s → %s", (prediction, gold, same) => {
    expect(mathEquivalent(prediction, gold)).toBe(same);
  });
});

describe.skipIf(!present)("math equivalence on benchmark answers", () => {
  it("every math500/aime gold answer, boxed in a sentence, equals itself", async () => {
    for (const file of ["math500.parquet", "aime24.parquet", "aime25.parquet"]) {
      const { tasks } = await loadTasks(`${BENCHMARKS}${file}`);
      const failures = tasks.filter(
        (t) => !mathEquivalent(`So the answer is $\\boxed{${t.answers[0]}}$.`, t.answers[0]!),
      );
      expect(failures.map((t) => t.id)).toEqual([]);
    }
  });

  it("accepts equivalent rewrites of real answers and rejects neighbours", async () => {
    const { tasks } = await loadTasks(`${BENCHMARKS}math500.parquet`);
    const gold = (id: string) => tasks.find((t) => t.id === id)!.answers[0]!;
    expect(gold("math500-162")).toBe("\\dfrac{17}{50}");
    expect(mathEquivalent("\\boxed{0.34}", gold("math500-162"))).toBe(true);
    expect(gold("math500-198")).toBe("10,\\!080");
    expect(mathEquivalent("\\boxed{10080}", gold("math500-198"))).toBe(true);
    expect(gold("math500-0")).toBe("\\left( 3, \\frac{\\pi}{2} \\right)");
    expect(mathEquivalent("\\boxed{(3, \\frac{\\pi}{2})}", gold("math500-0"))).toBe(true);
    expect(mathEquivalent("\\boxed{(3, \\pi)}", gold("math500-0"))).toBe(false);
    const { tasks: aime } = await loadTasks(`${BENCHMARKS}aime24.parquet`);
    expect(aime[7]!.answers[0]).toBe("025");
    expect(mathEquivalent("\\boxed{25}", aime[7]!.answers[0]!)).toBe(true);
    expect(mathEquivalent("\\boxed{26}", aime[7]!.answers[0]!)).toBe(false);
  });
});
