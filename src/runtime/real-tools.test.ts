import { copyFile, mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ByteTokenizer } from "../model/index.js";
import { ScriptedModel } from "../model/testing/index.js";
import { checkFormat, lossMask } from "../protocol/index.js";
import { CorpusIndex, createToolset, probeSandbox } from "../tools/index.js";
import { runAgent } from "./agent.js";
import { trajectoryText } from "./text.js";

const bytes = new ByteTokenizer();
const exampleCorpus = fileURLToPath(new URL("../../examples/corpus.jsonl", import.meta.url));
let dir: string;
let index: CorpusIndex;

beforeAll(async () => {
  // A copy, so the persisted index lands in a temporary folder rather than in examples/.
  dir = await mkdtemp(join(tmpdir(), "coa-runtime-"));
  const corpus = join(dir, "corpus.jsonl");
  await copyFile(exampleCorpus, corpus);
  index = (await CorpusIndex.open(corpus)).index;
});
afterAll(() => rm(dir, { recursive: true, force: true }));

describe("runAgent with the real tools", () => {
  it("answers a multi-hop question over the example corpus with local search and offline crawl", async () => {
    const model = new ScriptedModel([
      "<think>Find the engineer born in Osterby.</think>\n<web_search>engineer born in Osterby</web_search>",
      "<plan>Read her bridge's page.</plan>\n<crawl_page>https://example.org/wiki/tamsin-bridge</crawl_page>",
      "<suggested_answer>Sable River</suggested_answer>\n<double_check>The page names the Sable River. Score: 5</double_check>\n<answer>Sable River</answer>",
    ]);
    const tools = createToolset({ profile: "web", index, crawl: { offline: true } });
    const traj = await runAgent({
      model,
      tools,
      profile: "web",
      question: "Which river flows under the bridge designed by the engineer born in Osterby?",
    });
    expect(traj).toMatchObject({ finishReason: "answer", answer: "Sable River" });
    expect(traj.stats.toolCalls).toEqual({ web_search: 1, crawl_page: 1 });
    const { completion } = trajectoryText(traj, bytes);
    expect(completion).toContain("Mara Quill");
    expect(completion).toContain("carries the old coach road over the Sable River");
    expect(checkFormat(completion, "web").errors).toEqual([]);
    expect(lossMask(traj).filter((m) => m === 1)).toHaveLength(traj.stats.modelTokens);
  });

  it("runs the sandboxed code tool", async () => {
    const available = await probeSandbox().then(
      () => true,
      () => false,
    );
    if (!available) return expect.soft(available, "bubblewrap sandbox unavailable here").toBe(true);
    const model = new ScriptedModel([
      "<think>Compute it.</think>\n<code>```python\nprint(6 * 7)\n```</code>",
      "<think>The output says 42.</think>\n<answer>42</answer>",
    ]);
    const traj = await runAgent({
      model,
      tools: createToolset({ profile: "code" }),
      profile: "code",
      question: "6*7?",
    });
    expect(traj).toMatchObject({ finishReason: "answer", answer: "42" });
    expect(trajectoryText(traj, bytes).completion).toMatch(/<observation>[^<]*42[^<]*<\/observation>/);
  });
});
