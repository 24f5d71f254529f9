// fast-check arbitraries for protocol tests and the parser benchmark: valid steps and
// trajectories (content the parser round-trips) and corrupted texts (for robustness).
import fc from "fast-check";
import type { Step } from "../steps.js";
import { PROFILES, type ProfileName, type RoleTag, type ToolTag, tagTokens } from "../tags.js";
import { renderCodeArgs } from "../tool-args.js";

// Words that look like real model prose, including `<` and `>` used as operators and non-ASCII.
// None contains a tag shape, and words are joined by whitespace, so neither does any text.
const WORDS = [
  "the",
  "capital",
  "of",
  "France",
  "is",
  "Paris",
  "population",
  "in",
  "1990",
  "was",
  "about",
  "search",
  "for",
  "page",
  "says",
  "so",
  "answer",
  "check",
  "3",
  "4.5",
  "x<y",
  "a>b",
  "<=",
  "->",
  "(see",
  "above)",
  "Zürich",
  "日本",
  "🙂",
  "&amp;",
  '"quoted"',
  "it's",
  "year:",
  "https://ex.org/a?b=1",
];

const words = (min: number, max: number) =>
  fc
    .array(fc.tuple(fc.constantFrom(...WORDS), fc.constantFrom(" ", " ", " ", "\n")), {
      minLength: min,
      maxLength: max,
    })
    .map((ws) => ws.map(([w, sep], i) => (i ? sep : "") + w).join(""));

export const proseArb = words(1, 30);

const CODE_LINES = [
  "x = 3",
  "print(x * 2)",
  "if a<b>c: print('chain')",
  "for i in range(10):",
  "    total += i",
  "s = '<think>'",
  "import math",
  "print(math.sqrt(2))",
  "y = [i for i in range(4) if i > 1]",
];
const codeArb = fc
  .array(fc.constantFrom(...CODE_LINES), { minLength: 1, maxLength: 8 })
  .map((lines) => lines.join("\n"));

const urlArb = fc.constantFrom(
  "https://en.wikipedia.org/wiki/Paris",
  "https://ex.org/a?b=1",
  "file:///tmp/p.html",
);

export const toolArgsArb = (tool: ToolTag): fc.Arbitrary<string> => {
  switch (tool) {
    case "code":
      return fc
        .record({ code: codeArb, stdin: fc.option(words(1, 5), { nil: undefined }) })
        .map(({ code, stdin }) => renderCodeArgs(stdin === undefined ? { code } : { code, stdin }));
    case "crawl_page":
      return fc.array(urlArb, { minLength: 1, maxLength: 3 }).map((urls) => urls.join(" | "));
    default:
      return words(1, 8);
  }
};

/** Observation text may quote anything a page holds, protocol tags included, except its own close. */
const observationTextArb = fc
  .array(fc.oneof(proseArb, fc.constantFrom("<think>", "</answer>", "<b>bold</b>", "1. Title\n   url")), {
    minLength: 1,
    maxLength: 4,
  })
  .map((parts) => parts.join("\n"));

const textStep = (type: Exclude<RoleTag, "double_check"> | "observation") =>
  (type === "observation" ? observationTextArb : proseArb).map((text): Step => ({ type, text }));

export const doubleCheckArb = (scores: readonly number[] = [1, 2, 3, 4, 5]) =>
  fc
    .tuple(proseArb, fc.constantFrom(...scores), fc.constantFrom("Score: ", "score ", "Score = "))
    .map(
      ([text, score, label]): Step => ({ type: "double_check", text: `${text}\n${label}${score}`, score }),
    );

export const toolCallArb = (tools: readonly ToolTag[]) =>
  fc
    .constantFrom(...tools)
    .chain((tool) => toolArgsArb(tool).map((args): Step => ({ type: "tool_call", tool, args })));

/** Any single step with content that renders and parses back unchanged. */
export const stepArb: fc.Arbitrary<Step> = fc.oneof(
  fc
    .constantFrom("think", "plan", "reflection", "suggested_answer", "answer", "observation" as const)
    .chain(textStep),
  doubleCheckArb(),
  toolCallArb(PROFILES.all.tools),
);

/** A trajectory that follows every transition rule of the profile, ending with an answer. */
export function trajectoryArb(profile: ProfileName, maxBlocks = 6): fc.Arbitrary<Step[]> {
  const p = PROFILES[profile];
  const verifies = p.roles.includes("suggested_answer") && p.roles.includes("double_check");
  const reason = fc.constantFrom(
    ...p.roles.filter((r) => ["think", "plan", "reflection"].includes(r)),
  ) as fc.Arbitrary<"think" | "plan" | "reflection">;
  const seq = (...parts: fc.Arbitrary<Step>[]) => fc.tuple(...parts);
  const suggested = textStep("suggested_answer");
  const blocks: fc.Arbitrary<Step[]>[] = [
    reason.chain(textStep).map((s) => [s]),
    seq(toolCallArb(p.tools), textStep("observation")),
  ];
  if (verifies)
    blocks.push(
      seq(suggested, doubleCheckArb([3, 4, 5])),
      seq(suggested, doubleCheckArb([1, 2]), textStep("plan")),
      seq(suggested, doubleCheckArb([1, 2]), textStep("think"), textStep("plan")),
    );
  const finish = verifies
    ? fc.oneof(seq(textStep("answer")), seq(suggested, doubleCheckArb([3, 4, 5]), textStep("answer")))
    : seq(textStep("answer"));
  return fc
    .tuple(
      fc.constantFrom("think" as const, "plan" as const).chain(textStep),
      fc.array(fc.oneof(...blocks), { maxLength: maxBlocks }),
      finish,
    )
    .map(([first, middle, last]) => [first, ...middle.flat(), ...last]);
}

// Fragments for tag soup and insertions: every tag, broken tags, unknown tags, bare brackets.
const SOUP = [
  ...tagTokens(),
  "<thi",
  "nk>",
  "</",
  "<",
  ">",
  "<foo>",
  "</bar>",
  "<a_b1>",
  "```python\n",
  "```",
  "\n",
  " ",
  "Score: 2",
  "text",
  "<<think>>",
  "</think",
  "<Think>",
];
const soupArb = fc.array(fc.constantFrom(...SOUP), { maxLength: 40 }).map((parts) => parts.join(""));

type Edit = (s: string) => string;
const editArb: fc.Arbitrary<Edit> = fc.oneof(
  fc.tuple(fc.nat(), fc.nat(40)).map(
    ([at, n]): Edit =>
      (s) => {
        const i = at % (s.length + 1);
        return s.slice(0, i) + s.slice(i + n);
      },
  ),
  fc.tuple(fc.nat(), fc.oneof(soupArb, fc.string())).map(
    ([at, ins]): Edit =>
      (s) => {
        const i = at % (s.length + 1);
        return s.slice(0, i) + ins + s.slice(i);
      },
  ),
  fc.nat().map(
    (at): Edit =>
      (s) =>
        s.slice(0, at % (s.length + 1)),
  ),
  fc.tuple(fc.nat(), fc.constantFrom(...tagTokens())).map(
    ([k, tag]): Edit =>
      (s) => {
        const tags = [...s.matchAll(/<\/?[a-z_]+>/g)];
        const m = tags[k % Math.max(tags.length, 1)];
        return m ? s.slice(0, m.index) + tag + s.slice(m.index + m[0].length) : s;
      },
  ),
);

/** Rendered valid trajectories with random edits applied, and pure tag soup. */
export function corruptedTextArb(render: (steps: Step[]) => string): fc.Arbitrary<string> {
  const damaged = fc
    .tuple(trajectoryArb("all", 4), fc.array(editArb, { minLength: 1, maxLength: 5 }))
    .map(([steps, edits]) => edits.reduce((s, edit) => edit(s), render(steps)));
  return fc.oneof({ weight: 4, arbitrary: damaged }, { weight: 1, arbitrary: soupArb });
}
