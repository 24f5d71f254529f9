import { execFile } from "node:child_process";
import { promisify } from "node:util";
import { describe, expect, it } from "vitest";
import { engineRoot, findPython, pythonCandidates } from "./engine-python.js";

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
