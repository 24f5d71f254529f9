import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { parseCoa } from "./parser.js";
import { renderObservation, renderStep, renderSteps } from "./render.js";
import type { Step } from "./steps.js";
import { stepArb, trajectoryArb } from "./testing/arbitraries.js";

const withoutSpans = (steps: Step[]) => steps.map(({ span: _, ...rest }) => rest);

describe("renderStep", () => {
  it("writes each kind of step as the model writes it", () => {
    expect(renderStep({ type: "think", text: "hm" })).toBe("<think>hm</think>");
    expect(renderStep({ type: "double_check", text: "ok. Score: 4", score: 4 })).toBe(
      "<double_check>ok. Score: 4</double_check>",
    );
    expect(renderStep({ type: "tool_call", tool: "crawl_page", args: "https://a.org | https://b.org" })).toBe(
      "<crawl_page>https://a.org | https://b.org</crawl_page>",
    );
  });

  it("defuses the element's own closing tag inside its content", () => {
    const text = renderStep({ type: "observation", text: "page quoting </observation> here" });
    expect(text).toBe("<observation>page quoting <\\/observation> here</observation>");
    expect(parseCoa(text)).toMatchObject({
      errors: [],
      steps: [{ text: "page quoting <\\/observation> here" }],
    });
  });
});

describe("renderSteps", () => {
  it("separates steps with a newline, as the runtime's observation segments do", () => {
    const steps: Step[] = [
      { type: "think", text: "t" },
      { type: "tool_call", tool: "web_search", args: "q" },
      { type: "observation", text: "r" },
      { type: "answer", text: "a" },
    ];
    const runtimeText = `<think>t</think>\n<web_search>q</web_search>${renderObservation("r")}<answer>a</answer>`;
    expect(renderSteps(steps)).toBe(runtimeText);
  });

  it("parses back to the same steps for any sequence of valid steps (property)", () => {
    fc.assert(
      fc.property(fc.array(stepArb, { maxLength: 12 }), (steps) => {
        const parsed = parseCoa(renderSteps(steps));
        expect(parsed.errors).toEqual([]);
        expect(withoutSpans(parsed.steps)).toEqual(steps);
      }),
      { numRuns: 300 },
    );
  });

  it("spans of parsed steps locate each rendered step exactly (property)", () => {
    fc.assert(
      fc.property(trajectoryArb("all"), (steps) => {
        const text = renderSteps(steps);
        const parsed = parseCoa(text, { profile: "all" });
        expect(parsed.steps.map((s) => text.slice(s.span!.start, s.span!.end))).toEqual(
          steps.map(renderStep),
        );
      }),
      { numRuns: 200 },
    );
  });
});
