import { mkdtemp, readFile, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { type ScriptCall, ScriptedModel } from "../model/testing/index.js";
import { judgePrompt, LlmJudge, parseVerdict } from "./judge.js";

const INPUT = { question: "Who wrote Hamlet?", golds: ["William Shakespeare"], prediction: "Shakespeare" };

/** A judge model that marks a prediction correct when it shares a word with a gold, counting its calls. */
function wordJudge(replies: ((call: ScriptCall) => string)[] = []) {
  const seen: ScriptCall[] = [];
  const model = new ScriptedModel((call) => {
    seen.push(call);
    const scripted = replies[seen.length - 1];
    if (scripted) return scripted(call);
    const prediction = /Candidate answer: (.*)/.exec(call.prompt)![1]!.toLowerCase();
    const golds = /Reference answers:\n([\s\S]*?)\nCandidate/.exec(call.prompt)![1]!.toLowerCase();
    const correct = prediction.split(" ").some((w) => golds.includes(w));
    return `{"correct": ${correct}, "reason": "word overlap"}`;
  });
  return { model, seen };
}

describe("verdict parsing", () => {
  it("finds the JSON object in a chatty or fenced reply", () => {
    expect(parseVerdict('{"correct": true, "reason": "same person"}')).toEqual({
      correct: true,
      reason: "same person",
    });
    expect(parseVerdict('Sure.\n```json\n{"correct": false}\n```')).toEqual({ correct: false, reason: "" });
    expect(parseVerdict('{"note": 1} then {"correct": true, "reason": "ok"}')).toEqual({
      correct: true,
      reason: "ok",
    });
  });

  it("rejects replies without a boolean verdict", () => {
    expect(parseVerdict("The answer is correct.")).toBeNull();
    expect(parseVerdict('{"correct": "yes"}')).toBeNull();
    expect(parseVerdict('{"correct": true')).toBeNull();
  });

  it("the prompt carries question, every gold and the candidate", () => {
    const prompt = judgePrompt({ ...INPUT, golds: ["William Shakespeare", "Shakespeare"] });
    expect(prompt).toContain("Question: Who wrote Hamlet?");
    expect(prompt).toContain("- William Shakespeare\n- Shakespeare\n");
    expect(prompt).toContain("Candidate answer: Shakespeare");
  });
});

describe("LlmJudge", () => {
  it("judges, then answers the same request from its cache", async () => {
    const { model, seen } = wordJudge();
    const judge = new LlmJudge({ model });
    expect(await judge.judge(INPUT)).toEqual({
      verdict: { correct: true, reason: "word overlap" },
      cached: false,
    });
    expect(await judge.judge(INPUT)).toEqual({
      verdict: { correct: true, reason: "word overlap" },
      cached: true,
    });
    expect(await judge.judge({ ...INPUT, prediction: "Marlowe" })).toMatchObject({
      verdict: { correct: false },
    });
    expect(seen).toHaveLength(2);
    expect(seen[0]!.request.temperature).toBe(0);
  });

  it("asks once for concurrent identical requests", async () => {
    const { model, seen } = wordJudge();
    const judge = new LlmJudge({ model });
    await Promise.all([judge.judge(INPUT), judge.judge(INPUT), judge.judge(INPUT)]);
    expect(seen).toHaveLength(1);
  });

  it("retries a malformed verdict, sampling on the retry", async () => {
    const { model, seen } = wordJudge([() => "I think it is right"]);
    const outcome = await new LlmJudge({ model }).judge(INPUT);
    expect(outcome).toMatchObject({ verdict: { correct: true }, cached: false });
    expect(seen).toHaveLength(2);
    expect(seen[1]!.request.temperature).toBe(0.7);
  });

  it("returns an error, not a wrong answer, when every attempt is malformed", async () => {
    const { model, seen } = wordJudge([() => "hmm", () => "maybe", () => "{correct: true}"]);
    const outcome = await new LlmJudge({ model, retries: 2 }).judge(INPUT);
    expect(outcome).toEqual({ error: 'malformed verdict: "{correct: true}" (after 3 attempts)' });
    expect(seen).toHaveLength(3);
  });

  it("returns an error when the judge is down, and does not cache it", async () => {
    let down = true;
    const model = new ScriptedModel(() => {
      if (down) throw new Error("connect ECONNREFUSED 127.0.0.1:9");
      return '{"correct": true}';
    });
    const judge = new LlmJudge({ model, retries: 1 });
    expect(await judge.judge(INPUT)).toEqual({
      error: "judge call failed: connect ECONNREFUSED 127.0.0.1:9 (after 2 attempts)",
    });
    down = false;
    expect(await judge.judge(INPUT)).toMatchObject({ verdict: { correct: true }, cached: false });
  });

  it("keeps verdicts on disk for the next run and survives a torn last line", async () => {
    const cachePath = join(await mkdtemp(join(tmpdir(), "coa-judge-")), "judge-cache.jsonl");
    const first = wordJudge();
    await new LlmJudge({ model: first.model, cachePath }).judge(INPUT);
    await writeFile(cachePath, `${await readFile(cachePath, "utf8")}{"key": "abc", "verd`);

    const second = wordJudge();
    const judge = new LlmJudge({ model: second.model, cachePath });
    expect(await judge.judge(INPUT)).toEqual({
      verdict: { correct: true, reason: "word overlap" },
      cached: true,
    });
    expect(second.seen).toHaveLength(0);
    await judge.judge({ ...INPUT, prediction: "Bacon" });

    const third = wordJudge();
    const reread = new LlmJudge({ model: third.model, cachePath });
    expect(await reread.judge({ ...INPUT, prediction: "Bacon" })).toMatchObject({ cached: true });
    expect(third.seen).toHaveLength(0);
  });
});
