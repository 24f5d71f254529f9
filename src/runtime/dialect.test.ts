import { describe, expect, it } from "vitest";
import { z } from "zod";
import { ByteTokenizer } from "../model/index.js";
import { ScriptedModel } from "../model/testing/index.js";
import {
  checkTrajectory,
  type DialectName,
  type ProfileName,
  renderPrompt,
  type ToolTag,
} from "../protocol/index.js";
import type { Tool } from "../tools/index.js";
import { runAgent } from "./agent.js";

// The runtime reads the dialect's table: an AFM model's correct output, written the way it was
// trained, runs clean and its record passes the same checks the distiller applies.

const bytes = new ByteTokenizer();

const tool = (tag: ToolTag, text: string): Tool<string> => ({
  tag,
  description: `fake ${tag}`,
  argsSchema: z.string(),
  parseArgs: (raw) => raw.trim(),
  run: async () => ({ text, ok: true, truncated: false, elapsedMs: 0 }),
});

async function episode(profile: ProfileName, dialect: DialectName, script: string[], tools: Tool<string>[]) {
  return runAgent({
    model: new ScriptedModel(script),
    tools: new Map(tools.map((t) => [t.tag, t])),
    profile,
    dialect,
    question: "q?",
  });
}

describe("runAgent under a dialect", () => {
  it("afm-code: reflection is a role, the answer is the boxed content", async () => {
    const t = await episode(
      "code",
      "afm-code",
      [
        "<think>compute</think>\n<code>```python\nprint(6 * 7)\n```</code>",
        "<reflection>The sandbox agrees.</reflection>\n<answer>The result is \\boxed{42}</answer>",
      ],
      [tool("code", "42")],
    );
    expect(t).toMatchObject({ finishReason: "answer", answer: "42", dialect: "afm-code" });
    expect(t.stats.formatErrors).toBe(0);
    expect(checkTrajectory(t, (ids) => bytes.decode(ids)).problems).toEqual([]);
    // No chat template on a scripted model: the plain prompt, our own words for the dialect.
    expect(bytes.decode(t.promptIds)).toBe(
      renderPrompt({ profile: "code", question: "q?", dialect: "afm-code" }),
    );
  });

  it("afm-web: a 1-4 double check; 5 is off the scale and fed back as a format error", async () => {
    const t = await episode(
      "web",
      "afm-web",
      [
        "<think>t</think>\n<suggested_answer>Fredville</suggested_answer>\n<double_check>Sure. Score: 5</double_check>\n<answer>Fredville</answer>",
      ],
      [],
    );
    expect(t.meta.runtime.formatErrors).toMatchObject([{ kind: "bad_score" }]);
    const clean = await episode(
      "web",
      "afm-web",
      [
        "<think>t</think>\n<suggested_answer>Fredville</suggested_answer>\n<double_check>Sure. Score: 4</double_check>\n<answer>Fredville</answer>",
      ],
      [],
    );
    expect(clean.stats.formatErrors).toBe(0);
    expect(checkTrajectory(clean, (ids) => bytes.decode(ids)).problems).toEqual([]);
  });

  it("afm-mhqa: reflection allowed, the |-joined answer kept whole for scoring", async () => {
    const t = await episode(
      "mhqa",
      "afm-mhqa",
      [
        "<think>t</think>\n<wiki_search>founders</wiki_search>",
        "<reflection>Both named.</reflection>\n<answer>Ann|Ben</answer>",
      ],
      [tool("wiki_search", "Ann and Ben")],
    );
    expect(t).toMatchObject({ finishReason: "answer", answer: "Ann|Ben" });
    expect(t.stats.formatErrors).toBe(0);
  });
});
