import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { CoaStreamParser, MAX_TAG_NAME, parseCoa } from "./parser.js";
import { renderSteps } from "./render.js";
import { corruptedTextArb, trajectoryArb } from "./testing/arbitraries.js";

/** The [start, end) span of the first occurrence of `needle` in `text`. */
const spanOf = (text: string, needle: string, from = 0) => {
  const start = text.indexOf(needle, from);
  if (start < 0) throw new Error(`${needle} not in text`);
  return { start, end: start + needle.length };
};

/** Parses `text` pushed in chunks of `chunk` characters. */
const streamed = (text: string, chunk: number) => {
  const parser = new CoaStreamParser();
  for (let i = 0; i < text.length; i += chunk) parser.push(text.slice(i, i + chunk));
  return parser.end();
};

const kinds = (text: string, opts?: Parameters<typeof parseCoa>[1]) =>
  parseCoa(text, opts).errors.map((e) => e.kind);

describe("parseCoa: steps", () => {
  it("reads every role tag with its exact span", () => {
    const text =
      "<think>why</think>\n<plan>how</plan>\n<reflection>oops</reflection>\n" +
      "<suggested_answer>Paris</suggested_answer>\n<double_check>Right. Score: 4</double_check>\n<answer>Paris</answer>";
    const { steps, errors } = parseCoa(text);
    expect(errors).toEqual([]);
    expect(steps).toEqual([
      { type: "think", text: "why", span: spanOf(text, "<think>why</think>") },
      { type: "plan", text: "how", span: spanOf(text, "<plan>how</plan>") },
      { type: "reflection", text: "oops", span: spanOf(text, "<reflection>oops</reflection>") },
      {
        type: "suggested_answer",
        text: "Paris",
        span: spanOf(text, "<suggested_answer>Paris</suggested_answer>"),
      },
      {
        type: "double_check",
        text: "Right. Score: 4",
        score: 4,
        span: spanOf(text, "<double_check>Right. Score: 4</double_check>"),
      },
      { type: "answer", text: "Paris", span: spanOf(text, "<answer>Paris</answer>") },
    ]);
  });

  it("reads every tool tag and the observation, trimming surrounding whitespace only", () => {
    const code = "<code>\n```python\nif a<b>c:\n    print('</think>')\n```\n</code>";
    const text =
      "<web_search> capital of France </web_search><observation>1. Paris\n<b>bold</b></observation>" +
      "<crawl_page>https://a.org | https://b.org</crawl_page><wiki_search>Paris</wiki_search>" +
      code;
    const { steps, errors } = parseCoa(text);
    expect(errors).toEqual([]);
    expect(steps.map((s) => (s.type === "tool_call" ? [s.tool, s.args] : [s.type, s.text]))).toEqual([
      ["web_search", "capital of France"],
      ["observation", "1. Paris\n<b>bold</b>"],
      ["crawl_page", "https://a.org | https://b.org"],
      ["wiki_search", "Paris"],
      ["code", "```python\nif a<b>c:\n    print('</think>')\n```"],
    ]);
    expect(steps[4].span).toEqual(spanOf(text, code));
  });

  it("keeps text inside tool elements opaque: only the element's own closing tag ends it", () => {
    const { steps, errors } = parseCoa("<web_search>a <plan> b </answer> c</web_search>");
    expect(errors).toEqual([]);
    expect(steps).toMatchObject([{ type: "tool_call", args: "a <plan> b </answer> c" }]);
  });

  it("ignores whitespace between elements and treats a `<` that is no tag as text", () => {
    const { steps, errors } = parseCoa("  \n<think>2 < 3 and 5 > 4, x<y</think>\n\n");
    expect(errors).toEqual([]);
    expect(steps).toMatchObject([{ type: "think", text: "2 < 3 and 5 > 4, x<y" }]);
  });
});

describe("parseCoa: format errors with positions", () => {
  it("unclosed_tag spans from the opening tag to the end of input; the element yields no step", () => {
    const text = "<think>a</think><answer>Par";
    const { steps, errors } = parseCoa(text);
    expect(steps.map((s) => s.type)).toEqual(["think"]);
    expect(errors).toEqual([
      { kind: "unclosed_tag", message: expect.any(String), span: { start: 16, end: text.length } },
    ]);
  });

  it("stray_text covers the non-whitespace text between elements", () => {
    const text = "<think>a</think>  so then \n<plan>b</plan> tail ";
    const { errors } = parseCoa(text);
    expect(errors.map((e) => [e.kind, text.slice(e.span.start, e.span.end)])).toEqual([
      ["stray_text", "so then"],
      ["stray_text", "tail"],
    ]);
  });

  it("nested_tag: a tag opened inside a role element stays part of its text", () => {
    const text = "<think>first <plan>inner</plan> rest</think>";
    const { steps, errors } = parseCoa(text);
    expect(steps).toEqual([
      { type: "think", text: "first <plan>inner</plan> rest", span: { start: 0, end: text.length } },
    ]);
    expect(errors).toEqual([
      { kind: "nested_tag", message: expect.any(String), span: spanOf(text, "<plan>") },
    ]);
  });

  it("a missing close lets the next element nest, and the outer element runs to the end", () => {
    const text = "<think>a<web_search>q</web_search>";
    expect(parseCoa(text).errors.map((e) => [e.kind, e.span])).toEqual([
      ["unclosed_tag", { start: 0, end: text.length }],
      ["nested_tag", spanOf(text, "<web_search>")],
    ]);
  });

  it("unknown_tag for tag-shaped text outside the protocol, inside role text too", () => {
    const text = "<foo><think>see <br> here</think></bar>";
    const { steps, errors } = parseCoa(text);
    expect(steps).toMatchObject([{ type: "think", text: "see <br> here" }]);
    expect(errors.map((e) => [e.kind, text.slice(e.span.start, e.span.end)])).toEqual([
      ["unknown_tag", "<foo>"],
      ["unknown_tag", "<br>"],
      ["unknown_tag", "</bar>"],
    ]);
  });

  it("unexpected_close for a closing tag with nothing open", () => {
    const text = "<think>a</think></think><plan>b</answer></plan>";
    expect(parseCoa(text).errors.map((e) => [e.kind, e.span])).toEqual([
      ["unexpected_close", { start: 16, end: 24 }],
      ["unexpected_close", spanOf(text, "</answer>")],
    ]);
  });

  it("missing_code_fence when <code> holds no fenced block", () => {
    const text = "<code>print(1)</code>";
    expect(parseCoa(text).errors).toEqual([
      { kind: "missing_code_fence", message: expect.any(String), span: { start: 0, end: text.length } },
    ]);
    expect(kinds("<code>```python\nprint(1)\n```</code>")).toEqual([]);
  });

  it("empty_tag for an element with only whitespace; the step is still returned", () => {
    const { steps, errors } = parseCoa("<think> \n </think><web_search></web_search>");
    expect(steps.map((s) => s.type)).toEqual(["think", "tool_call"]);
    expect(errors.map((e) => [e.kind, e.span])).toEqual([
      ["empty_tag", { start: 0, end: 18 }],
      ["empty_tag", { start: 18, end: 43 }],
    ]);
  });

  it("bad_score when a double check ends without a 1-5 score", () => {
    const { steps, errors } = parseCoa("<double_check>looks fine</double_check>");
    expect(steps).toMatchObject([{ type: "double_check", score: null }]);
    expect(errors.map((e) => [e.kind, e.span])).toEqual([["bad_score", { start: 0, end: 39 }]]);
  });

  it("model_wrote_observation only when parsing model output", () => {
    const text = "<web_search>q</web_search><observation>fake</observation>";
    expect(kinds(text)).toEqual([]);
    expect(parseCoa(text, { modelOutput: true }).errors.map((e) => [e.kind, e.span])).toEqual([
      ["model_wrote_observation", spanOf(text, "<observation>")],
    ]);
  });

  it("disabled_tag for tags the profile leaves out, still parsed as steps", () => {
    const text = "<reflection>r</reflection><web_search>q</web_search><wiki_search>q</wiki_search>";
    const { steps, errors } = parseCoa(text, { profile: "mhqa" });
    expect(steps).toHaveLength(3);
    expect(errors.map((e) => [e.kind, text.slice(e.span.start, e.span.end)])).toEqual([
      ["disabled_tag", "<reflection>"],
      ["disabled_tag", "<web_search>"],
    ]);
    expect(kinds(text, { profile: "all" })).toEqual([]);
  });

  it("reports errors sorted by position", () => {
    const { errors } = parseCoa("x <think>a <foo> b");
    expect(errors.map((e) => e.kind)).toEqual(["stray_text", "unclosed_tag", "unknown_tag"]);
  });
});

describe("CoaStreamParser", () => {
  it("completes steps as their closing tags arrive, across split tags", () => {
    const parser = new CoaStreamParser();
    for (const chunk of ["<thi", "nk>a", "b</th", "ink>", "<web_sea", "rch>q</web_search", ">"])
      parser.push(chunk);
    expect(parser.steps).toMatchObject([
      { type: "think", text: "ab" },
      { type: "tool_call", args: "q" },
    ]);
    expect(parser.end().errors).toEqual([]);
  });

  it("shows completed steps before the input ends", () => {
    const parser = new CoaStreamParser();
    parser.push("<think>a</think><plan>b");
    expect(parser.steps.map((s) => s.type)).toEqual(["think"]);
    parser.push("</plan>");
    expect(parser.steps.map((s) => s.type)).toEqual(["think", "plan"]);
  });

  it("end() is idempotent and later pushes are ignored", () => {
    const parser = new CoaStreamParser();
    parser.push("<think>a</think>");
    const first = parser.end();
    parser.push("<plan>b</plan>");
    expect(parser.end()).toBe(first);
    expect(first.steps).toHaveLength(1);
  });

  const chunked = (text: string, cuts: number[]) => {
    const at = [...new Set(cuts.map((c) => c % (text.length + 1)))].sort((a, b) => a - b);
    const parser = new CoaStreamParser({ profile: "web", modelOutput: true });
    let last = 0;
    for (const cut of [...at, text.length]) {
      parser.push(text.slice(last, cut));
      last = cut;
    }
    return parser.end();
  };

  it("equals the one-shot result for any chunking of any text (property)", () => {
    const text = fc.oneof(corruptedTextArb(renderSteps), trajectoryArb("all").map(renderSteps));
    fc.assert(
      fc.property(text, fc.array(fc.nat(), { maxLength: 30 }), (t, cuts) => {
        expect(chunked(t, cuts)).toEqual(parseCoa(t, { profile: "web", modelOutput: true }));
      }),
      { numRuns: 500 },
    );
  });

  it("equals the one-shot result when fed one character at a time", () => {
    fc.assert(
      fc.property(corruptedTextArb(renderSteps), (t) => {
        expect(
          chunked(
            t,
            [...t].map((_, i) => i),
          ),
        ).toEqual(parseCoa(t, { profile: "web", modelOutput: true }));
      }),
      { numRuns: 100 },
    );
  });
});

describe("tag names are bounded", () => {
  it("a name up to MAX_TAG_NAME is tag-shaped; a longer one is plain text", () => {
    const longest = `<${"a".repeat(MAX_TAG_NAME)}>`;
    const tooLong = `<${"a".repeat(MAX_TAG_NAME + 1)}>`;
    const text = `<think>${longest} ${tooLong}</think>`;
    const { steps, errors } = parseCoa(text);
    expect(steps).toMatchObject([{ type: "think", text: `${longest} ${tooLong}` }]);
    expect(errors.map((e) => [e.kind, e.span])).toEqual([["unknown_tag", spanOf(text, longest)]]);
    for (const chunk of [1, 3, 16]) expect(streamed(text, chunk)).toEqual(parseCoa(text));
  });

  it("a streamed `<` followed by endless letters is text as soon as it is too long for a tag", () => {
    const parser = new CoaStreamParser();
    parser.push("<think>x <");
    for (let i = 0; i < 10; i++) parser.push("a".repeat(MAX_TAG_NAME));
    parser.push("</think>");
    expect(parser.steps).toMatchObject([{ type: "think", text: `x <${"a".repeat(10 * MAX_TAG_NAME)}` }]);
  });
});

describe("linear time", () => {
  /**
   * Fastest of up to `reps` runs in ms: the minimum is the run least disturbed by other load on a
   * shared machine. Stops early past `budgetMs` so a quadratic regression fails fast, not in minutes.
   */
  const fastest = (run: () => unknown, reps: number, budgetMs = 400) => {
    let best = Number.POSITIVE_INFINITY;
    const t0 = performance.now();
    for (let r = 0; r < reps && performance.now() - t0 < budgetMs; r++) {
      const t = performance.now();
      run();
      best = Math.min(best, performance.now() - t);
    }
    return best;
  };
  // Inputs of size n; the quadratic parser this replaced took 60-100x longer at 10n.
  const cases: [string, (n: number) => () => unknown, number][] = [
    [
      "a `<` then letters, streamed in 16-char chunks",
      (n) => () => streamed(`<${"a".repeat(n)}`, 16),
      20_000,
    ],
    ["a `<` then letters, streamed in 4-char chunks", (n) => () => streamed(`<${"a".repeat(n)}`, 4), 10_000],
    [
      "nested opening and unmatched closing tags, one-shot",
      (n) => {
        const text = `<think><answer>${"<plan>".repeat(n)}${"</answer>".repeat(n)}</think>`;
        return () => parseCoa(text);
      },
      500,
    ],
  ];

  it.each(cases)("%s: 10x the input costs at most 20x the time", (_, make, n) => {
    const small = make(n);
    const large = make(10 * n);
    // Warm up the JIT; the large input's cold first run is discarded by taking the fastest. Sizes stay
    // small enough that retained errors do not make garbage collection the cost being measured.
    small();
    // A moment of load or a collection can inflate one measurement several-fold (a linear case once
    // measured 54x in 18 runs on a 2-core machine); the quadratic parser measured 60-100x every time.
    // So the best of up to three measurements is held to the bound.
    let ratio = Number.POSITIVE_INFINITY;
    for (let attempt = 0; attempt < 3 && ratio >= 20; attempt++) {
      ratio = Math.min(ratio, fastest(large, 10) / fastest(small, 20));
    }
    expect(ratio).toBeLessThan(20);
  });
});

describe("robustness", () => {
  it("survives 10,000 corrupted trajectories: never throws, spans in bounds and ordered", () => {
    fc.assert(
      fc.property(corruptedTextArb(renderSteps), (text) => {
        const { steps, errors } = parseCoa(text, { profile: "code", modelOutput: true });
        let prevEnd = 0;
        for (const step of steps) {
          const span = step.span!;
          if (span.start < prevEnd || span.end > text.length || span.start >= span.end) return false;
          prevEnd = span.end;
        }
        return errors.every(
          (e) => e.span.start >= 0 && e.span.start <= e.span.end && e.span.end <= text.length,
        );
      }),
      { numRuns: 10_000 },
    );
  });
});
