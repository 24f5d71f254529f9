import { describe, expect, it } from "vitest";
import { formatReward } from "../rewards/format-reward.js";
import { checkFormat } from "./check.js";
import { answerOf, answerParts, DIALECTS, profileIn } from "./dialects.js";
import { promptMessages, renderPrompt, systemPrompt } from "./prompts.js";
import { describeRule, TRANSITION_RULES } from "./rules.js";

// Hand-written outputs in the form each released AFM agent was trained to write (their system
// prompts describe it): the web agent scores its double check 1-4 and answers at 3 or more; the
// multi-hop QA agent reflects, has no suggested answer and joins several answers with "|"; the code
// agent reflects and boxes its answer.
const AFM_WEB = [
  "<think>I need the founding year.</think>",
  "<plan>1. search the founding year</plan>",
  "<think>search first</think>",
  "<web_search>Orla Institute founded</web_search>",
  "<observation>The Orla Institute was founded in 1921.</observation>",
  "<think>the page says 1921</think>",
  "<suggested_answer>1921</suggested_answer>",
  "<double_check>The page states 1921 plainly. Score: 2</double_check>",
  "<think>one source is thin; plan again</think>",
  "<plan>1. confirm on a second page</plan>",
  "<web_search>Orla Institute history 1921</web_search>",
  "<observation>Founded 1921 by the Orla family.</observation>",
  "<suggested_answer>1921</suggested_answer>",
  "<double_check>Two sources agree. Score: 4</double_check>",
  "<answer>1921</answer>",
].join("\n");

const AFM_MHQA = [
  "<think>Two people are asked for.</think>",
  "<plan>find both founders</plan>",
  "<wiki_search>Orla Institute founders</wiki_search>",
  "<observation>Founded by Ann Orla and Ben Orla.</observation>",
  "<reflection>The page names both; no need to search again.</reflection>",
  "<think>answer with both names</think>",
  "<answer>Ann Orla|Ben Orla</answer>",
].join("\n");

const AFM_CODE = [
  "<think>Sum the first ten squares.</think>",
  "<plan>compute it with code</plan>",
  "<code>```python\nprint(sum(i * i for i in range(1, 11)))\n```</code>",
  "<observation>385</observation>",
  "<reflection>The code ran and matches n(n+1)(2n+1)/6.</reflection>",
  "<answer>\\boxed{385}</answer>",
].join("\n");

describe("dialects", () => {
  it("accept each AFM agent's correct output under its own dialect", () => {
    expect(checkFormat(AFM_WEB, "web", { dialect: "afm-web" }).errors).toEqual([]);
    expect(checkFormat(AFM_MHQA, "mhqa", { dialect: "afm-mhqa" }).errors).toEqual([]);
    expect(checkFormat(AFM_CODE, "code", { dialect: "afm-code" }).errors).toEqual([]);
    expect(formatReward(AFM_CODE, "code", { dialect: "afm-code", modelOutput: false }).correct).toBe(true);
  });

  it("where this project's own rules would misjudge them", () => {
    // Score 4 is a pass on 1-4 but not a failure on 1-5 either; a re-plan after "Score: 2" holds in
    // both. What breaks is the tag set and the answer form:
    expect(checkFormat(AFM_MHQA, "mhqa").errors.map((e) => e.kind)).toEqual(["disabled_tag"]);
    expect(checkFormat(AFM_CODE, "code").errors.map((e) => e.kind)).toEqual(["disabled_tag"]);
  });

  it("read the double check on the dialect's scale", () => {
    const five =
      "<think>t</think>\n<suggested_answer>x</suggested_answer>\n<double_check>Score: 5</double_check>\n<answer>x</answer>";
    expect(checkFormat(five, "web").ok).toBe(true);
    expect(checkFormat(five, "web", { dialect: "afm-web" }).errors).toMatchObject([
      { kind: "bad_score", message: "<double_check> must end with a score from 1 to 4" },
    ]);
    const low = checkFormat(five.replace("Score: 5", "Score: 2"), "web", { dialect: "afm-web" });
    expect(low.errors.map((e) => e.kind)).toEqual(["bad_transition"]);
  });

  it("require a boxed answer where the dialect boxes answers", () => {
    const unboxed = AFM_CODE.replace("\\boxed{385}", "385");
    expect(checkFormat(unboxed, "code", { dialect: "afm-code" }).errors).toMatchObject([
      { kind: "bad_answer", message: "<answer> must hold its answer in \\boxed{} (dialect afm-code)" },
    ]);
    expect(formatReward(unboxed, "code", { dialect: "afm-code" }).correct).toBe(false);
  });

  it("give the answer as the dialect writes it", () => {
    expect(answerOf("\\boxed{\\frac{1}{2}}", "afm-code")).toBe("\\frac{1}{2}");
    expect(answerOf("\\boxed{385}", "coa")).toBe("\\boxed{385}");
    expect(answerParts("Ann Orla | Ben Orla", "afm-mhqa")).toEqual(["Ann Orla", "Ben Orla"]);
    expect(answerParts("Ann Orla | Ben Orla", "coa")).toEqual(["Ann Orla | Ben Orla"]);
  });

  it("set the roles, the rule wording and our own prompt from one table", () => {
    expect(profileIn("mhqa", "afm-mhqa").roles).toEqual(DIALECTS["afm-mhqa"].roles);
    expect(profileIn("mhqa", "afm-mhqa").tools).toEqual(["wiki_search"]);
    const failed = TRANSITION_RULES.find((r) => r.kind === "next" && r.whenCheckFails)!;
    expect(describeRule(failed, "afm-web")).toContain("scoring 2 or less");
    expect(systemPrompt("web", "afm-web")).toContain("Score: 1-4");
    expect(systemPrompt("code", "afm-code")).toContain("\\boxed{answer}");
    expect(systemPrompt("mhqa", "afm-mhqa")).toContain("<reflection>");
  });

  it("lay the prompt out as chat messages the way the dialect's models were trained", () => {
    const supplied = { profile: "web", question: " Who? ", systemPrompt: "SYS" } as const;
    expect(promptMessages({ ...supplied, dialect: "afm-web" })).toEqual([
      { role: "user", content: "SYS\n\nQuestion: Who?" },
    ]);
    expect(promptMessages(supplied)).toEqual([
      { role: "system", content: "SYS" },
      { role: "user", content: "Who?" },
    ]);
    expect(renderPrompt(supplied)).toBe("SYS\n\nQuestion: Who?\nSteps:\n");
  });
});
