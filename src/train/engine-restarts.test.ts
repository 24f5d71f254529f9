import { describe, expect, it } from "vitest";
import { type RestartableEngine, withEngineRestarts } from "./engine-restarts.js";

/** An engine whose process is alive until `die` is called, as a crash would leave it. */
function fakeEngine(): RestartableEngine & { die(reason: string): void; closed: boolean } {
  let reason: string | null = null;
  return {
    get crashReason() {
      return reason;
    },
    die(r: string) {
      reason = r;
    },
    closed: false,
    async close() {
      this.closed = true;
    },
  };
}

describe("withEngineRestarts", () => {
  it("starts a new engine from the last checkpoint when the engine dies mid-run", async () => {
    const engines: ReturnType<typeof fakeEngine>[] = [];
    const restarts: string[] = [];
    const result = await withEngineRestarts(
      async () => {
        engines.push(fakeEngine());
        return engines.at(-1)!;
      },
      async (engine) => {
        if (engines.length === 1) {
          engine.die("exited (signal SIGSEGV)");
          throw new Error("the engine died during the request");
        }
        return "done";
      },
      {
        latestCheckpoint: async () => "runs/sft/checkpoints/step-001300",
        onRestart: (i) => restarts.push(`${i.reason} -> ${i.checkpoint} (${i.restart} of ${i.restarts})`),
      },
    );
    expect(result).toBe("done");
    expect(engines).toHaveLength(2);
    expect(engines.every((e) => e.closed)).toBe(true);
    expect(restarts).toEqual(["exited (signal SIGSEGV) -> runs/sft/checkpoints/step-001300 (1 of 2)"]);
  });

  it("throws an error of a live engine as it came, without restarting", async () => {
    let starts = 0;
    const run = withEngineRestarts(
      async () => {
        starts++;
        return fakeEngine();
      },
      async () => {
        throw new Error("HTTP 400: no token has loss_mask = 1");
      },
      { latestCheckpoint: async () => "ckpt" },
    );
    await expect(run).rejects.toThrow("HTTP 400");
    expect(starts).toBe(1);
  });

  it("gives up when the run has no checkpoint yet, or after the last restart", async () => {
    const dies = async (engine: ReturnType<typeof fakeEngine>) => {
      engine.die("exited (signal SIGKILL)");
      throw new Error("the engine died during the request");
    };
    let starts = 0;
    const start = async () => {
      starts++;
      return fakeEngine();
    };
    await expect(withEngineRestarts(start, dies, { latestCheckpoint: async () => null })).rejects.toThrow(
      "died",
    );
    expect(starts).toBe(1);
    starts = 0;
    await expect(
      withEngineRestarts(start, dies, { restarts: 2, latestCheckpoint: async () => "ckpt" }),
    ).rejects.toThrow("died");
    expect(starts).toBe(3);
  });
});
