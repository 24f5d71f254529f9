import { appendFile, mkdtemp, readFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { RunTrajectory } from "../runtime/index.js";
import { sampleTrajectory } from "../server/testing.js";
import { TrajectoryStore } from "./trajectory-store.js";

describe("TrajectoryStore", () => {
  it("cuts a torn last line on open, appends whole lines, finds old ids in the log after a restart", async () => {
    const file = join(await mkdtemp(join(tmpdir(), "coa-store-")), "log.jsonl");
    await appendFile(file, '{"id":"torn by a kill');
    const store = await TrajectoryStore.open(file);
    const ids = Array.from({ length: 20 }, (_, i) => `chatcmpl-${i}`);
    await Promise.all(
      ids.map((id) =>
        store.add(
          id,
          RunTrajectory.parse(sampleTrajectory("q", [{ steps: [{ type: "answer", text: "x" }] }])),
        ),
      ),
    );
    const lines = (await readFile(file, "utf8")).split("\n");
    expect(lines.pop()).toBe("");
    expect(lines.map((l) => JSON.parse(l).meta.serve.responseId).sort()).toEqual([...ids].sort());

    const restarted = await TrajectoryStore.open(file);
    expect((await restarted.get("chatcmpl-7"))?.meta.serve.responseId).toBe("chatcmpl-7");
    expect(await restarted.get("chatcmpl-99")).toBeUndefined();
  });
});
