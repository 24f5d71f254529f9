import { describe, expect, it } from "vitest";
import { cleanAnswer, isNoIssues, parseManagerReply, parseWorkerReply } from "./replies.js";

describe("manager replies", () => {
  it("reads a thought and one directive", () => {
    expect(parseManagerReply("The founder is known.\nSEARCH: Find the birthplace of Varen Holt.")).toEqual({
      thought: "The founder is known.",
      action: { kind: "search", text: "Find the birthplace of Varen Holt." },
    });
    expect(parseManagerReply("CODE: Add up 3 and 4.").action).toEqual({
      kind: "code",
      text: "Add up 3 and 4.",
    });
  });

  it("cleans answers and tolerates a line break after the colon", () => {
    expect(parseManagerReply('ANSWER:\n"Tessmoor".').action).toEqual({ kind: "answer", text: "Tessmoor" });
    expect(cleanAnswer("**1852**\nbecause …")).toBe("1852");
  });

  it("returns no action when there is no directive", () => {
    expect(parseManagerReply("I think we should look it up.")).toEqual({
      thought: "I think we should look it up.",
      action: null,
    });
  });
});

describe("worker replies", () => {
  const searcher = ["web_search", "crawl_page"] as const;

  it("reads a tool call with the thought before it", () => {
    expect(parseWorkerReply("Look it up.\n<web_search>Varen Holt born</web_search>", searcher)).toEqual({
      kind: "tool",
      thought: "Look it up.",
      tool: "web_search",
      args: "Varen Holt born",
    });
  });

  it("reads a report", () => {
    expect(parseWorkerReply("REPORT: Varen Holt was born in 1852.", searcher)).toEqual({
      kind: "report",
      thought: "",
      text: "Varen Holt was born in 1852.",
    });
  });

  it("names what is wrong with malformed tool syntax", () => {
    expect(parseWorkerReply("<web_search>Varen Holt", searcher)).toMatchObject({
      kind: "malformed",
      problem: "the <web_search> tag is never closed",
    });
    expect(parseWorkerReply("<code>```python\nprint(1)\n```</code>", searcher)).toMatchObject({
      kind: "malformed",
      problem: "<code> is not yours to use; use <web_search> or <crawl_page>",
    });
    expect(parseWorkerReply("search Varen Holt please", searcher).kind).toBe("malformed");
  });
});

it("recognises a critic with nothing to flag", () => {
  expect(isNoIssues("NO_ISSUES")).toBe(true);
  expect(isNoIssues("No issues.")).toBe(true);
  expect(isNoIssues("The year came from a blog.")).toBe(false);
});
