import { mkdtemp, readdir, stat } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { expect, it } from "vitest";
import { Engine } from "./engine.js";
import { readCheckpointManifest, releaseWeights } from "./engine-checkpoint.js";
import { readTokenizerFile, TOKENIZER_FILE } from "./tokenizer-files.js";

it("a released checkpoint holds the weights only, scores exactly as the original, and trains on", async () => {
  const dir = await mkdtemp(path.join(os.tmpdir(), "coa-release-"));
  const options = { dtype: "fp32" as const, threads: 1, onLog: () => {} };
  const trained = await Engine.start({ preset: "micro" }, options);
  const ids = [1, 40, 41, 42, 43, 44];
  try {
    await trained.trainSft({ batch: [{ input_ids: ids, loss_mask: [0, 1, 1, 1, 1, 1] }], lr: 1e-2 });
    await trained.saveCheckpoint(path.join(dir, "full"));
    const manifest = await releaseWeights(path.join(dir, "full"), path.join(dir, "base"));
    expect(Object.keys(manifest.files)).toEqual(["model"]);
    expect((await readCheckpointManifest(path.join(dir, "base"))).step).toBe(1);
    expect((await readTokenizerFile(path.join(dir, "base", TOKENIZER_FILE))).name).toBe(trained.tokenizer);
    const size = async (d: string) => {
      const [state] = (await readdir(d)).filter((n) => n.startsWith("state-"));
      const files = await readdir(path.join(d, state!));
      return (await Promise.all(files.map((f) => stat(path.join(d, state!, f))))).reduce(
        (a, s) => a + s.size,
        0,
      );
    };
    expect(await size(path.join(dir, "base"))).toBeLessThan((await size(path.join(dir, "full"))) / 2);

    const base = await Engine.start({ checkpoint: path.join(dir, "base") }, options);
    try {
      expect(await base.score([ids])).toEqual(await trained.score([ids]));
      const step = await base.trainSft({
        batch: [{ input_ids: ids, loss_mask: [0, 1, 1, 1, 1, 1] }],
        lr: 1e-2,
      });
      expect(Number.isFinite(step.loss)).toBe(true);
    } finally {
      await base.close();
    }
  } finally {
    await trained.close();
  }
}, 60_000);
