import { execFile } from "node:child_process";
import { existsSync } from "node:fs";
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { constants, tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { describe, expect, it } from "vitest";
import { type LaunchRequest, launch, WARM_SANDBOX_FAILED, type WarmSandbox } from "./launcher.js";

const python = ["/usr/bin/python3", "/usr/local/bin/python3"].find((p) => existsSync(p)) ?? "python3";
const env = { PATH: "/usr/bin:/bin" };
const run = (argv: string[], more: Partial<LaunchRequest> = {}) =>
  launch(python, { argv, env, inputs: { 0: "" }, outputBytes: 1 << 20, wallMs: 10_000, ...more });
/** Whether `pid` still runs within a second: a killed orphan is reaped by init a little later. */
async function stillRunning(pid: number): Promise<boolean> {
  for (let i = 0; i < 50; i++) {
    const stat = await readFile(`/proc/${pid}/stat`, "utf8").catch(() => null);
    if (stat === null || stat.slice(stat.lastIndexOf(")") + 2).startsWith("Z")) return false;
    await new Promise((r) => setTimeout(r, 20));
  }
  return true;
}

describe("launch: programs started by the launcher process", () => {
  it("feeds stdin and further descriptors, and returns both streams and the exit status", async () => {
    const script = "cat; cat <&3 >&2; cat <&4; exit 3";
    const done = await run(["sh", "-c", script], {
      inputs: { 0: "in\n", 3: "three\n", 4: Buffer.from("four\n") },
    });
    expect(done).toMatchObject({ exitCode: 3, signal: null, killedBy: null, truncated: null });
    expect(done.stdout.toString()).toBe("in\nfour\n");
    expect(done.stderr.toString()).toBe("three\n");
  });

  it("runs in the directory and environment asked for, with no other descriptors open", async () => {
    const done = await run(["sh", "-c", 'pwd; echo "$PATH $HOME"; ls /proc/self/fd'], { cwd: "/tmp" });
    // ls's own listing descriptor is the one past 0-2.
    expect(done.stdout.toString()).toBe("/tmp\n/usr/bin:/bin \n0\n1\n2\n3\n");
  });

  it("starts programs with every standard signal at its default and none blocked, as Node does", async () => {
    const done = await run(["grep", "-E", "^Sig(Ign|Blk)", "/proc/self/status"]);
    const [blocked, ignored] = done.stdout
      .toString()
      .trim()
      .split("\n")
      .map((line) => BigInt(`0x${line.split("\t")[1]}`));
    expect(blocked).toBe(0n);
    // Signals 1-31 (SIGPIPE and SIGXFSZ above all, which Python ignores); libuv leaves the rest as inherited.
    expect(ignored! & 0x7fffffffn).toBe(0n);
  });

  it("kills the whole process group at the wall limit, keeping what was printed", async () => {
    const done = await run(["sh", "-c", "echo started; sleep 30 & echo $! >&2; wait"], { wallMs: 300 });
    expect(done).toMatchObject({
      killedBy: "wall_timeout",
      signal: constants.signals.SIGKILL,
      exitCode: null,
    });
    expect(done.stdout.toString()).toBe("started\n");
    expect(await stillRunning(Number(done.stderr.toString()))).toBe(false);
  });

  it("cuts output at the byte limit and stops the program", async () => {
    const done = await run(["sh", "-c", "while :; do echo 0123456789; done"], { outputBytes: 25 });
    expect(done).toMatchObject({ killedBy: "output_limit", truncated: "stdout" });
    expect(done.stdout.toString()).toBe("0123456789\n0123456789\n012");
  });

  it("stops a run when its signal aborts, also one aborted before it started", async () => {
    const controller = new AbortController();
    const going = run(["sleep", "30"], { signal: controller.signal });
    setTimeout(() => controller.abort(), 100);
    expect(await going).toMatchObject({ killedBy: "aborted", signal: constants.signals.SIGKILL });
    expect(await run(["sleep", "30"], { signal: AbortSignal.abort() })).toMatchObject({
      killedBy: "aborted",
    });
  });

  it("returns output of many reads whole, byte for byte", async () => {
    // 420,000 bytes through 64 KiB reads and one reply line; each line holds its number.
    const done = await run(["sh", "-c", "seq -w 1 60000 | sed 's/^/x/'"]);
    const lines = done.stdout.toString().split("\n");
    expect(done.stdout.length).toBe(60000 * 7);
    expect(lines.slice(0, 2)).toEqual(["x00001", "x00002"]);
    expect(lines.at(-2)).toBe("x60000");
  });

  it("leaves stdin unread without harm, and runs many programs at once", async () => {
    const big = "x".repeat(1 << 20);
    const all = await Promise.all(
      Array.from({ length: 8 }, (_, i) => run(["sh", "-c", `echo ${i}`], { inputs: { 0: big } })),
    );
    expect(all.map((d) => d.stdout.toString())).toEqual(Array.from({ length: 8 }, (_, i) => `${i}\n`));
  });

  it("rejects a program that cannot start with the system's reason", async () => {
    await expect(run(["/nonexistent/program"])).rejects.toMatchObject({ code: "ENOENT" });
  });

  it("rejects the runs of a launcher that died, and starts another for the next", async () => {
    const dir = await mkdtemp(join(tmpdir(), "coa-launcher-"));
    const file = join(dir, "parent");
    const going = run(["sh", "-c", `echo $PPID > ${file}; sleep 30`]).catch((err: Error) => err);
    let parent = "";
    while (!parent.endsWith("\n")) {
      await new Promise((r) => setTimeout(r, 20));
      parent = await readFile(file, "utf8").catch(() => "");
    }
    process.kill(Number(parent), "SIGKILL");
    expect(String(await going)).toMatch(/the sandbox launcher .* exited with SIGKILL/);
    expect((await run(["echo", "again"])).stdout.toString()).toBe("again\n");
    await rm(dir, { recursive: true });
  });

  it("lets the process exit once its runs are done", async () => {
    const dir = await mkdtemp(join(tmpdir(), "coa-launcher-"));
    const script = join(dir, "exits.mts");
    const module = fileURLToPath(new URL("./launcher.ts", import.meta.url));
    await writeFile(
      script,
      [
        `import { launch } from ${JSON.stringify(module)};`,
        `const done = await launch(${JSON.stringify(python)}, { argv: ["echo", "ok"], env: {}, inputs: { 0: "" }, outputBytes: 100, wallMs: 5000 });`,
        "process.stdout.write(done.stdout);",
      ].join("\n"),
    );
    const tsx = fileURLToPath(new URL("../../node_modules/tsx/dist/cli.mjs", import.meta.url));
    const { stdout } = await promisify(execFile)(process.execPath, [tsx, script], { timeout: 20_000 });
    expect(stdout).toBe("ok\n");
    await rm(dir, { recursive: true });
  });

  describe("warm sandboxes", () => {
    // A stand-in for zygote.py: answers each run on its stdout descriptor with its own pid and the
    // program's stdin, then reports an exit status of 3 (or sleeps, for the wall limit).
    const resident = [
      "import os, socket, sys, time",
      "control = socket.socket(fileno=5)",
      "print('started', flush=True)",
      "control.send(b'ready')",
      "while True:",
      "    message, fds, _, _ = socket.recv_fds(control, 65536, 4)",
      "    if not message: sys.exit(0)",
      "    if message == b'sleep': time.sleep(30)",
      "    if message == b'flood': os.write(fds[1], b'x' * 200)",
      "    if message == b'nap': time.sleep(0.3)",
      "    stdin = os.read(fds[0], 100)",
      "    os.write(fds[1], b'%d %s' % (os.getpid(), stdin))",
      "    for fd in fds: os.close(fd)",
      "    control.send(b'%d 0' % (3 << 8))",
    ].join("\n");
    const sandbox = (argv: string[], sleep = false): WarmSandbox => ({
      start: { argv, env, inputs: {} },
      idle: 2,
      run: sleep ? "sleep" : "run",
    });
    const warmRun = (box: WarmSandbox, more: Partial<LaunchRequest> = {}) =>
      run([], { sandbox: box, inputs: { 0: "in", 3: "program" }, ...more });

    it("run one after another in one sandbox, each with its own descriptors and status", async () => {
      const box = sandbox([python, "-c", resident]);
      const [a, b] = [await warmRun(box), await warmRun(box, { inputs: { 0: "again", 3: "" } })];
      expect(a).toMatchObject({ exitCode: 3, signal: null, killedBy: null });
      const [pidA, stdinA] = a.stdout.toString().split(" ");
      const [pidB, stdinB] = b.stdout.toString().split(" ");
      expect([stdinA, stdinB]).toEqual(["in", "again"]);
      expect(pidB).toBe(pidA);
    });

    it("end a sandbox whose run was stopped, and start another for the next", async () => {
      const slow = sandbox([python, "-c", resident], true);
      const stopped = await warmRun(slow, { wallMs: 300 });
      expect(stopped).toMatchObject({ killedBy: "wall_timeout", signal: constants.signals.SIGKILL });
      const box = sandbox([python, "-c", resident]);
      const first = (await warmRun(box)).stdout.toString().split(" ")[0];
      // The same sandbox (runs differ only in what its resident does), held by a run that sleeps.
      const aborted = await warmRun({ ...box, run: "sleep" }, { signal: AbortSignal.abort() });
      expect(aborted.killedBy).toBe("aborted");
      expect((await warmRun(box)).stdout.toString().split(" ")[0]).not.toBe(first);
    });

    it("never hand the next run a sandbox ended under a run that passed its output limit", async () => {
      // The output past the limit ends the run's sandbox whether its status came first or not.
      const box = sandbox([python, "-c", resident]);
      for (let i = 0; i < 30; i++) {
        const flooded = await warmRun({ ...box, run: "flood" }, { outputBytes: 100 });
        expect(flooded.killedBy).toBe("output_limit");
        expect(await warmRun(box)).toMatchObject({ exitCode: 3, killedBy: null });
      }
    });

    it("serve a burst from few sandboxes, each run's wall limit counted from its program's start", async () => {
      // 16 programs of 0.3 s under a 0.5 s limit: the last wait longer than that for a sandbox.
      const box = sandbox([python, "-c", resident]);
      const burst = await Promise.all(
        Array.from({ length: 16 }, (_, i) =>
          warmRun({ ...box, run: "nap" }, { wallMs: 500, inputs: { 0: `${i}`, 3: "" } }),
        ),
      );
      expect(burst.map((r) => r.killedBy)).toEqual(Array(16).fill(null));
      expect(burst.map((r) => r.stdout.toString().split(" ")[1])).toEqual(
        Array.from({ length: 16 }, (_, i) => `${i}`),
      );
    });

    it("reject a run whose sandbox ended before taking it, with what the sandbox printed", async () => {
      const broken = sandbox(["sh", "-c", "echo no namespaces here >&2; exit 1"]);
      await expect(warmRun(broken)).rejects.toMatchObject({
        code: WARM_SANDBOX_FAILED,
        message: expect.stringContaining("no namespaces here"),
      });
    });
  });
});
