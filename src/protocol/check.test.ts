import { describe, expect, it } from "vitest";
import { checkFormat } from "./check.js";

describe("checkFormat", () => {
  it("passes a well-formed trajectory", () => {
    const text =
      "<think>t</think>\n<wiki_search>q</wiki_search>\n<observation>r</observation>\n<answer>a</answer>";
    expect(checkFormat(text, "mhqa")).toMatchObject({ ok: true, errors: [] });
  });

  it("combines parse errors and rule breaches by position, each disabled tag once", () => {
    const text = "<think>t</think> junk <web_search>q</web_search><answer>a</answer>";
    const result = checkFormat(text, "mhqa");
    expect(result.ok).toBe(false);
    expect(result.errors.map((e) => e.kind)).toEqual(["stray_text", "disabled_tag", "bad_transition"]);
  });

  it("can check a trajectory still being generated, as model output", () => {
    const text = "<plan>p</plan><code>```python\nprint(1)\n```</code>";
    expect(checkFormat(text, "code", { complete: false, modelOutput: true }).ok).toBe(true);
    expect(
      checkFormat(`${text}<observation>x</observation>`, "code", { modelOutput: true }).errors.map(
        (e) => e.kind,
      ),
    ).toEqual(["model_wrote_observation", "bad_transition"]);
  });
});
