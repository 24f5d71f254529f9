import { expect, it } from "vitest";
import { parseSeeds } from "../../tasks/index.js";
import { commandArgs } from "../command-args.js";
import { checkPresetSeeds, DEMO_PRESETS, type DemoPreset } from "./presets.js";
import { demoStages } from "./stages.js";

it("every preset tests on a world none of its stages trains on, and a config that breaks this is refused", () => {
  for (const p of Object.values(DEMO_PRESETS)) {
    expect(checkPresetSeeds(p)).toBe(p);
    expect(parseSeeds(p.trainSeeds).length).toBeGreaterThan(1);
  }
  expect(() => checkPresetSeeds({ ...DEMO_PRESETS.quick, trainSeeds: "1-3" })).toThrow("must be unseen");
  const pretraining = { ...DEMO_PRESETS.full, pretrainSeeds: "1-300" };
  expect(() => checkPresetSeeds(pretraining)).toThrow("pretrainSeeds 1-300 include");
  // A base that is not pretrained here does not read those seeds.
  expect(checkPresetSeeds({ ...pretraining, base: "shipped" })).toBeDefined();
});

it("a demo with a base distills into the base's vocabulary and fine-tunes the base", () => {
  const args = (p: DemoPreset, name: string) =>
    commandArgs(demoStages(p, "runs/d").find((s) => s.name === name)!.command);
  const full = DEMO_PRESETS.full;
  expect(
    demoStages(full, "runs/d")
      .map((s) => s.name)
      .slice(0, 6),
  ).toEqual(["world", "worlds", "pretrain", "pretrain-read", "pretrain-compute", "teach"]);
  expect(args(full, "pretrain")).toEqual(expect.arrayContaining(["--exclude-seeds", String(full.seed)]));
  // Each further stage continues the one before, on the same worlds, never the test world.
  expect(args(full, "pretrain-read")).toEqual(
    expect.arrayContaining(["--from", "runs/d/base/last", "--exclude-seeds", String(full.seed)]),
  );
  expect(args(full, "pretrain-compute")).toEqual(
    expect.arrayContaining(["--from", "runs/d/base-read/last", "--exclude-seeds", String(full.seed)]),
  );
  expect(args(full, "distill")).toEqual(
    expect.arrayContaining(["--tokenizer", "runs/d/base-compute/last/tokenizer.json"]),
  );
  expect(args(full, "sft")).toEqual(expect.arrayContaining(["--from", "runs/d/base-compute/last"]));
  const from = (p: DemoPreset) => {
    const sft = args(p, "sft");
    return sft[sft.indexOf("--from") + 1];
  };
  // The quick and default presets fine-tune the base that already knows the protocol.
  expect(from(DEMO_PRESETS.quick)).toMatch(/models\/agent-base$/);
  expect(from(DEMO_PRESETS.default)).toMatch(/models\/agent-base$/);
  expect(args(DEMO_PRESETS.quick, "distill")).toEqual(
    expect.arrayContaining([expect.stringMatching(/models\/agent-base\/tokenizer\.json$/)]),
  );
  const fresh = { ...DEMO_PRESETS.quick, base: "none" as const };
  expect(args(fresh, "sft")).toEqual(expect.arrayContaining(["--preset", fresh.modelPreset]));
  expect(args(fresh, "distill")).toEqual(expect.arrayContaining(["--tokenizer", `bpe:${fresh.bpeVocab}`]));
});
