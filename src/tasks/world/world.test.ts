import { mkdtemp, readdir, readFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { describe, expect, it } from "vitest";
import type { Task } from "../task.js";
import { buildWorld } from "./build.js";
import { generateWorld, SPLITS, writeWorld } from "./generate.js";
import { Plan } from "./plan.js";
import { readFact, renderArticle, renderMinorSource } from "./prose.js";
import { type Attr, articleId } from "./schema.js";

async function filesOf(dir: string): Promise<Record<string, string>> {
  const out: Record<string, string> = {};
  for (const name of await readdir(dir, { recursive: true })) {
    const full = path.join(dir, name);
    if (name.includes(".")) out[name] = await readFile(full, "utf8");
  }
  return out;
}

describe("world generator", () => {
  it("writes byte-identical files for the same seed and different ones for another seed", async () => {
    const root = await mkdtemp(path.join(tmpdir(), "coa-world-"));
    await writeWorld(path.join(root, "a"), generateWorld(7, "tiny"));
    await writeWorld(path.join(root, "b"), generateWorld(7, "tiny"));
    await writeWorld(path.join(root, "c"), generateWorld(8, "tiny"));
    const [a, b, c] = await Promise.all(["a", "b", "c"].map((d) => filesOf(path.join(root, d))));
    expect(Object.keys(a).sort()).toEqual([
      "corpus.jsonl",
      "tasks/dev.jsonl",
      "tasks/rl.jsonl",
      "tasks/test.jsonl",
      "tasks/train.jsonl",
      "world.json",
    ]);
    expect(b).toEqual(a);
    expect(c["corpus.jsonl"]).not.toEqual(a["corpus.jsonl"]);
    expect(c["tasks/train.jsonl"]).not.toEqual(a["tasks/train.jsonl"]);
  });

  it("caps lookups with maxHops: same corpus, every kind still asked, held-out groups still in test", () => {
    const full = generateWorld(5, "tiny");
    const easy = generateWorld(5, "tiny", { maxHops: 2 });
    expect(easy.corpus).toEqual(full.corpus);
    expect(easy.manifest.maxHops).toBe(2);
    const tasks = SPLITS.flatMap((s) => easy.splits[s]);
    expect(Math.max(...tasks.map((t) => Number(t.meta.hops)))).toBe(2);
    expect(new Set(tasks.map((t) => t.kind))).toEqual(
      new Set(["multihop", "arithmetic", "comparison", "computation"]),
    );
    const heldOut = new Set(easy.manifest.heldOutGroups);
    for (const t of easy.splits.train) expect(heldOut.has(t.meta.group as number)).toBe(false);
    expect(() => generateWorld(5, "tiny", { maxHops: 5 })).toThrow(/maxHops/);
  });

  it("lists each split in a shuffled order, so the first tasks are a fair sample", () => {
    const first = small.splits.train.slice(0, 200);
    expect(new Set(first.map((t) => t.kind)).size).toBe(4);
  });

  const small = generateWorld(1, "small");
  const all = SPLITS.flatMap((s) => small.splits[s].map((t) => ({ split: s, task: t })));

  it("gives a small world enough training tasks for the demo, and short articles", () => {
    expect(small.splits.train.length).toBeGreaterThanOrEqual(2000);
    for (const split of SPLITS) expect(small.splits[split].length).toBeGreaterThan(100);
    const lengths = small.corpus.map((d) => d.text.length).sort((x, y) => x - y);
    expect(lengths.at(-1)).toBeLessThan(300);
    expect(new Set(small.corpus.map((d) => d.id)).size).toBe(small.corpus.length);
    expect(small.corpus[0].url).toMatch(/^https:\/\/world\.local\/wiki\/\S+$/);
  });

  it("shares no question or id between splits", () => {
    expect(new Set(all.map((x) => x.task.id)).size).toBe(all.length);
    expect(new Set(all.map((x) => x.task.question)).size).toBe(all.length);
  });

  it("holds whole entity groups out for the test split", () => {
    const heldOut = new Set(small.manifest.heldOutGroups);
    expect(heldOut.size).toBe(3);
    const entitiesOf = (t: Task) => t.meta.entities as string[];
    const testEntities = new Set(small.splits.test.flatMap(entitiesOf));
    for (const { split, task } of all) {
      if (task.kind === "computation") continue;
      expect(heldOut.has(task.meta.group as number)).toBe(split === "test");
      if (split !== "test") expect(entitiesOf(task).filter((e) => testEntities.has(e))).toEqual([]);
    }
  });

  it("records kind, hops, supporting documents, difficulty and a plan that names only what the question names", () => {
    const docIds = new Set(small.corpus.map((d) => d.id));
    for (const { task } of all) {
      const { hops, supportingDocs, difficulty } = task.meta as {
        hops: number;
        supportingDocs: string[];
        difficulty: string;
      };
      const plan = Plan.parse(task.meta.plan);
      expect(["easy", "medium", "hard"]).toContain(difficulty);
      if (task.kind === "computation") {
        expect(hops).toBe(0);
        continue;
      }
      expect(hops).toBeGreaterThanOrEqual(2);
      expect(hops).toBeLessThanOrEqual(4);
      expect(plan.steps.filter((s) => s.op === "lookup")).toHaveLength(hops);
      for (const doc of supportingDocs) expect(docIds.has(doc)).toBe(true);
      for (const step of plan.steps) {
        if (step.op === "lookup" && typeof step.subject === "string")
          expect(task.question).toContain(step.subject);
      }
      if (task.kind !== "comparison")
        for (const gold of task.answers) expect(task.question).not.toContain(gold);
    }
  });

  it("states every fact so that the reader reads it back, and minor sources state a wrong value", () => {
    const world = buildWorld(1, "tiny");
    for (const e of world.entities) {
      const { text } = renderArticle(world, e);
      for (const [attr, raw] of Object.entries(e.attrs) as [Attr, string | number][]) {
        const expected = world.byId.get(String(raw))?.name ?? String(raw);
        expect(readFact(e.type, attr, text), `${e.name}.${attr} in: ${text}`).toBe(expected);
      }
    }
    expect(world.minorSources.length).toBeGreaterThan(0);
    for (const m of world.minorSources) {
      const e = world.byId.get(m.entityId)!;
      const { text } = renderMinorSource(world, m);
      for (const { attr, wrong } of m.claims) {
        expect(readFact(e.type, attr, text)).toBe(world.byId.get(String(wrong))?.name ?? String(wrong));
        expect(wrong).not.toBe(e.attrs[attr]);
      }
    }
  });

  it("makes near-duplicate names that differ by a letter or two, with their own articles", () => {
    const world = buildWorld(1, "small");
    expect(world.twinOf.size).toBeGreaterThan(10);
    for (const [twin, original] of world.twinOf) {
      const [a, b] = [world.byId.get(twin)!.name, world.byId.get(original)!.name];
      expect(a).not.toBe(b);
      expect(a.length).toBeGreaterThanOrEqual(b.length - 1);
      expect(articleId(a)).not.toBe(articleId(b));
    }
  });
});
