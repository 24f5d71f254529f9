import { execFile } from "node:child_process";
import { existsSync } from "node:fs";
import { mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import { describe, expect, it } from "vitest";
import { engineRoot, findPython, pythonCandidates, startWithPython } from "./engine-python.js";

const run = promisify(execFile);

describe("findPython", () => {
  it("prefers COA_PYTHON alone when it is set", () => {
    expect(pythonCandidates({ COA_PYTHON: "/opt/py/bin/python" })).toEqual(["/opt/py/bin/python"]);
    expect(pythonCandidates({})).toEqual(["/usr/bin/python3", "python3", "python"]);
  });

  it("says how to install torch when no candidate has it", async () => {
    const err = await findPython(["/nonexistent/python3", "/bin/false"]).catch((e: Error) => e);
    expect(err).toBeInstanceOf(Error);
    expect((err as Error).message).toMatch(/\/nonexistent\/python3 \(not found\)/);
    expect((err as Error).message).toMatch(/apt-get install python3-torch libopenblas0-pthread/);
    expect((err as Error).message).toMatch(/COA_PYTHON/);
  });

  it("finds torch without importing it (the engine imports it once, itself)", async () => {
    const { python } = await findPython();
    // A `torch` first on the path that leaves a mark when imported: the probe must find it and not run it.
    const dir = await mkdtemp(path.join(tmpdir(), "coa-probe-"));
    const mark = path.join(dir, "imported");
    await mkdir(path.join(dir, "torch"));
    await writeFile(path.join(dir, "torch", "__init__.py"), `open(${JSON.stringify(mark)}, "w").close()\n`);
    const before = process.env.PYTHONPATH;
    process.env.PYTHONPATH = dir;
    try {
      // Another candidate list than the call above, so the remembered answer is not reused.
      const found = await findPython([python, "/nonexistent/python3"]);
      expect(found.python).toBe(python);
      expect(found.torchDir).toBe(path.join(dir, "torch"));
      expect(existsSync(mark)).toBe(false);
    } finally {
      if (before === undefined) delete process.env.PYTHONPATH;
      else process.env.PYTHONPATH = before;
      await rm(dir, { recursive: true, force: true });
    }
  });
});

describe("startWithPython", () => {
  /** A start that fails where `bad` is the interpreter, logging first, and answers its interpreter. */
  const fakeStart =
    (bad: string, tried: string[]) => async (python: string, onLog: (line: string) => void) => {
      tried.push(python);
      onLog(`starting ${python}`);
      if (python === bad) throw new Error(`no torch in ${python}`);
      return python;
    };

  it("starts the first candidate without probing, its log once it is ready", async () => {
    const tried: string[] = [];
    const logged: string[] = [];
    // No candidate here has torch: a probe would fail.
    const started = await startWithPython(["/bin/true", "/nonexistent/python3"], fakeStart("", tried), (l) =>
      logged.push(l),
    );
    expect([started, tried, logged]).toEqual(["/bin/true", ["/bin/true"], ["starting /bin/true"]]);
  });

  it("tries the interpreter the probe finds when the first fails, without the first's log", async () => {
    const { python } = await findPython();
    const tried: string[] = [];
    const logged: string[] = [];
    const started = await startWithPython(["/bin/false", python], fakeStart("/bin/false", tried), (l) =>
      logged.push(l),
    );
    expect([started, tried, logged]).toEqual([python, ["/bin/false", python], [`starting ${python}`]]);
  });

  it("answers the first failure where the probe finds the same interpreter, and the probe's where none", async () => {
    const { python } = await findPython();
    const failed = startWithPython([python, "/nonexistent/python3"], fakeStart(python, []), () => {});
    await expect(failed).rejects.toThrow(`no torch in ${python}`);
    const none = startWithPython(
      ["/nonexistent/python3", "/bin/false"],
      fakeStart("/nonexistent/python3", []),
      () => {},
    );
    await expect(none).rejects.toThrow(/No Python with PyTorch found/);
  });
});

describe("engine/tests (Python unit tests)", () => {
  it("pass", async () => {
    const { python } = await findPython();
    const root = engineRoot();
    const { stderr } = await run(python, ["-m", "unittest", "discover", "-s", "tests", "-t", "."], {
      cwd: root,
      env: { ...process.env, PYTHONPATH: root },
      timeout: 120_000,
    });
    expect(stderr).toMatch(/\nOK/);
  }, 120_000);
});
