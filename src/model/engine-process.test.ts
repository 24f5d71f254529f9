import { spawn } from "node:child_process";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { engineGlibcTunables } from "./engine-process.js";

describe("engineGlibcTunables", () => {
  it("asks glibc's malloc for transparent huge pages, after the tunables the environment gives", () => {
    expect(engineGlibcTunables({})).toBe("glibc.malloc.hugetlb=1");
    expect(engineGlibcTunables({ GLIBC_TUNABLES: "glibc.malloc.arena_max=2" })).toBe(
      "glibc.malloc.arena_max=2:glibc.malloc.hugetlb=1",
    );
  });

  it("leaves a hugetlb the environment sets, and glibc's defaults under COA_ENGINE_MALLOC=glibc", () => {
    expect(engineGlibcTunables({ GLIBC_TUNABLES: "glibc.malloc.hugetlb=0" })).toBe("glibc.malloc.hugetlb=0");
    expect(engineGlibcTunables({ COA_ENGINE_MALLOC: "glibc" })).toBeUndefined();
    expect(
      engineGlibcTunables({ COA_ENGINE_MALLOC: "glibc", GLIBC_TUNABLES: "glibc.malloc.arena_max=2" }),
    ).toBe("glibc.malloc.arena_max=2");
  });
});

describe("EngineProcess", () => {
  it("stopped while its interpreter failed to start, signals nothing and rejects", async () => {
    // Node's `ChildProcess.kill` on a child whose spawn failed sends the signal to pid 0, that is to the
    // caller's whole process group (it took down CI runs). Run in a process group of its own, so that
    // such a kill ends only that group.
    const dir = await mkdtemp(path.join(tmpdir(), "coa-engine-process-"));
    try {
      const script = path.join(dir, "stop-failed.mts");
      const module = fileURLToPath(new URL("./engine-process.ts", import.meta.url));
      await writeFile(
        script,
        [
          `import { EngineProcess } from ${JSON.stringify(module)};`,
          "const abort = new AbortController();",
          'const options = { python: "/nonexistent/python3", args: [], root: ".", onLog() {}, startTimeoutMs: 5000 };',
          "const started = EngineProcess.start({ ...options, signal: abort.signal });",
          "abort.abort();",
          'console.log(await started.then(() => "started", (err) => "rejected: " + err.message));',
        ].join("\n"),
      );
      const child = spawn(process.execPath, ["--import", "tsx", script], { detached: true });
      let stdout = "";
      child.stdout.on("data", (chunk) => {
        stdout += chunk;
      });
      const [code, signal] = await new Promise<[number | null, string | null]>((resolve) =>
        child.on("exit", (c, s) => resolve([c, s])),
      );
      expect({ code, signal }).toEqual({ code: 0, signal: null });
      expect(stdout).toMatch(/^rejected: the engine.s start was cancelled/m);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  }, 30_000);
});
