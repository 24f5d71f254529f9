import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { extractCode, normalizeQuery, renderCodeArgs, splitUrls } from "./tool-args.js";

describe("extractCode", () => {
  it("reads a python block", () => {
    expect(extractCode("```python\nprint(1)\nprint(2)\n```")).toEqual({ code: "print(1)\nprint(2)" });
  });

  it("accepts an unlabelled or py fence and text around it", () => {
    expect(extractCode("Run this:\n```\nx = 1\n```\nthanks")).toEqual({ code: "x = 1" });
    expect(extractCode("```py\nx = 1\n```")).toEqual({ code: "x = 1" });
  });

  it("reads an optional stdin block, in either order", () => {
    expect(extractCode("```python\nprint(input())\n```\n```stdin\nhello\n```")).toEqual({
      code: "print(input())",
      stdin: "hello",
    });
    expect(extractCode("```stdin\n3\n```\n```python\nn = int(input())\n```")).toEqual({
      code: "n = int(input())",
      stdin: "3",
    });
  });

  it("returns null without a complete code fence", () => {
    expect(extractCode("print(1)")).toBeNull();
    expect(extractCode("```python\nprint(1)")).toBeNull();
    expect(extractCode("```stdin\n1\n```")).toBeNull();
    expect(extractCode("```javascript\nconsole.log(1)\n```")).toBeNull();
  });

  it("inverts renderCodeArgs (property)", () => {
    const body = fc
      .string({ minLength: 1 })
      .filter((s) => !s.includes("`") && !s.startsWith("\n") && !s.endsWith("\n") && !s.endsWith("\r"));
    fc.assert(
      fc.property(body, fc.option(body, { nil: undefined }), (code, stdin) => {
        const args = stdin === undefined ? { code } : { code, stdin };
        expect(extractCode(renderCodeArgs(args))).toEqual(args);
      }),
    );
  });
});

describe("splitUrls", () => {
  it("splits on | and unwraps markdown links and angle brackets", () => {
    expect(splitUrls(" https://a.org/x | [B page](https://b.org) |<https://c.org>| ")).toEqual([
      "https://a.org/x",
      "https://b.org",
      "https://c.org",
    ]);
  });
});

describe("normalizeQuery", () => {
  it("collapses whitespace", () => {
    expect(normalizeQuery("\n capital   of\tFrance \n")).toBe("capital of France");
  });
});
