import { describe, expect, it } from "vitest";
import { PROMPT_END, renderPrompt, systemPrompt } from "./prompts.js";
import { ALL_TAGS, OBSERVATION_TAG, openTag, PROFILES, ProfileName } from "./tags.js";

describe.each(ProfileName.options)("systemPrompt(%s)", (profile) => {
  const prompt = systemPrompt(profile);
  const p = PROFILES[profile];
  const enabled = new Set<string>([...p.roles, ...p.tools, OBSERVATION_TAG]);

  it("shows every enabled tag and no disabled one", () => {
    for (const tag of ALL_TAGS) expect(prompt.includes(openTag(tag)), tag).toBe(enabled.has(tag));
  });

  it("stays short: the model reads it on every example", () => {
    expect(prompt.length).toBeLessThan(700);
  });

  it("mentions double checking only where the profile has it", () => {
    expect(prompt.includes("Score")).toBe(p.roles.includes("double_check"));
  });
});

describe("renderPrompt", () => {
  it("is the system prompt, a blank line, the trimmed question, then the end marker", () => {
    expect(renderPrompt({ profile: "mhqa", question: "  Who wrote Dune?\n" })).toBe(
      `${systemPrompt("mhqa")}\n\nQuestion: Who wrote Dune?${PROMPT_END}`,
    );
    expect(PROMPT_END).toBe("\nSteps:\n");
  });

  it("teaches the tool argument syntax", () => {
    expect(systemPrompt("web")).toContain("<crawl_page>url1 | url2</crawl_page>");
    expect(systemPrompt("code")).toContain("```python\n");
  });
});
