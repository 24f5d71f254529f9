import { describe, expect, it } from "vitest";
import { PretrainConfig } from "./config.js";

describe("PretrainConfig", () => {
  it("holds out the last seed for eval and trains on the others, test seeds excluded", () => {
    const c = PretrainConfig.parse({ out: "runs/base", seeds: [1, 101, 102, 103], excludeSeeds: [1] });
    expect(c.worlds).toEqual({ train: [101, 102], eval: 103 });
    expect(c).toMatchObject({ size: "small", tokenizer: "bpe:2048", maxLength: 1024, batchTokens: 4096 });
  });

  it("takes a named held-out seed out of training", () => {
    const c = PretrainConfig.parse({ out: "o", seeds: [101, 102, 103], evalSeed: 101 });
    expect(c.worlds).toEqual({ train: [102, 103], eval: 101 });
  });

  it("refuses a test world as the held-out one, and a run with no world left to train on", () => {
    const bad = (input: object) => PretrainConfig.safeParse({ out: "o", ...input }).error?.issues[0];
    expect(bad({ seeds: [101, 102], evalSeed: 1, excludeSeeds: [1] })?.path).toEqual(["evalSeed"]);
    expect(bad({ seeds: [101, 102], excludeSeeds: [101] })?.path).toEqual(["seeds"]);
    expect(bad({ seeds: [101, 102], tokenizer: "bpe:lots" })?.path).toEqual(["tokenizer"]);
    expect(bad({ seeds: [101, 102], maxLength: 8192 })?.path).toEqual(["maxLength"]);
  });
});
