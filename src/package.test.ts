import { execFile, spawn } from "node:child_process";
import { cp, mkdir, mkdtemp, rm, symlink, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";

const exec = promisify(execFile);
const repo = fileURLToPath(new URL("..", import.meta.url));
const tsc = path.join(repo, "node_modules", "typescript", "bin", "tsc");

// Packing builds and installing fetches every dependency: about a minute on two cores, so `npm test`
// runs it only when asked (CI asks, in .ci/run).
describe.skipIf(process.env.COA_TEST_PACKAGE !== "1")("the packed tarball, installed", () => {
  let tmp: string;
  let project: string;
  let shipped: string[];
  const installed = () => path.join(project, "node_modules", "chain-of-agents");
  const coa = (args: string[]) =>
    exec(path.join(project, "node_modules", ".bin", "coa"), args, { cwd: project, timeout: 60_000 });

  beforeAll(async () => {
    tmp = await mkdtemp(path.join(os.tmpdir(), "coa-package-"));
    // Packed from a copy: `prepack` builds dist/, and bin/coa.js in this checkout runs dist/ when it
    // exists, which would put other tests (and the developer's `coa`) on a build of today's sources.
    const stage = path.join(tmp, "stage");
    const { stdout: listed } = await exec(
      "git",
      ["ls-files", "-z", "--cached", "--others", "--exclude-standard"],
      {
        cwd: repo,
        maxBuffer: 16 << 20,
      },
    );
    for (const file of listed.split("\0").filter(Boolean)) {
      await cp(path.join(repo, file), path.join(stage, file), { force: true }).catch((err) => {
        // A file deleted in the working tree is still listed by git until the deletion is staged.
        if ((err as NodeJS.ErrnoException).code !== "ENOENT") throw err;
      });
    }
    await symlink(path.join(repo, "node_modules"), path.join(stage, "node_modules"), "dir");
    const { stdout: packed } = await exec("npm", ["pack", "--json", "--pack-destination", tmp], {
      cwd: stage,
      timeout: 180_000,
      maxBuffer: 16 << 20,
    }).catch((err) => {
      // tsc reports a failed `prepack` build on stdout, which the error message leaves out.
      throw new Error(`npm pack failed:\n${err.stdout}${err.stderr}`);
    });
    const [pack] = JSON.parse(packed) as { filename: string; files: { path: string }[] }[];
    shipped = pack!.files.map((f) => f.path);

    project = path.join(tmp, "project");
    await mkdir(project);
    await writeFile(
      path.join(project, "package.json"),
      JSON.stringify({ name: "consumer", private: true, type: "module" }),
    );
    await exec(
      "npm",
      ["install", path.join(tmp, pack!.filename), "--no-audit", "--no-fund", "--prefer-offline"],
      { cwd: project, timeout: 300_000 },
    );
  }, 480_000);

  afterAll(async () => {
    if (tmp) await rm(tmp, { recursive: true, force: true });
  });

  it("ships the build, the engine's Python, the shipped base and no sources, tests or test helpers", () => {
    for (const file of [
      "bin/coa.js",
      "dist/lib.js",
      "dist/lib.d.ts",
      "dist/cli/main.js",
      "dist/tools/launcher.py",
      "dist/tools/zygote.py",
      "engine/coa_engine/__main__.py",
      "engine/coa_engine/specials.json",
      "models/base/checkpoint.json",
      "models/agent-base/checkpoint.json",
      "README.md",
    ]) {
      expect(shipped).toContain(file);
    }
    // Without src/, bin/coa.js cannot fall back to tsx: `coa --help` below runs the build.
    expect(
      shipped.filter(
        (f) => f.startsWith("src/") || /\.test\.|\/testing[./]|\/test-|__pycache__|engine\/tests/.test(f),
      ),
    ).toEqual([]);
  });

  it("imports as an ES module", async () => {
    await writeFile(
      path.join(project, "use.js"),
      [
        'import { createToolset, evaluate, loadTasks, openModel, parseCoa, runAgent, runDistill } from "chain-of-agents";',
        "const kinds = [createToolset, evaluate, loadTasks, openModel, runAgent, runDistill].map((f) => typeof f);",
        'const { steps } = parseCoa("<think>a</think><answer>\\\\boxed{42}</answer>");',
        "console.log(JSON.stringify({ kinds, steps: steps.map((s) => s.type) }));",
      ].join("\n"),
    );
    const { stdout } = await exec(process.execPath, ["use.js"], { cwd: project });
    expect(JSON.parse(stdout)).toEqual({ kinds: Array(6).fill("function"), steps: ["think", "answer"] });
  });

  it("type-checks against the shipped declarations", async () => {
    await writeFile(
      path.join(project, "tsconfig.json"),
      JSON.stringify({
        compilerOptions: {
          module: "nodenext",
          target: "es2022",
          strict: true,
          skipLibCheck: true,
          noEmit: true,
        },
        files: ["typed.ts"],
      }),
    );
    await writeFile(
      path.join(project, "typed.ts"),
      [
        'import { createToolset, openModel, runAgent, type Trajectory } from "chain-of-agents";',
        "export async function answer(question: string): Promise<string | undefined> {",
        '  const model = await openModel("engine:micro");',
        '  const t: Trajectory = await runAgent({ model, tools: createToolset(), profile: "web", question });',
        "  return t.answer ?? undefined;",
        "}",
        // Proves the names are typed, not `any`: a wrong argument must be an error.
        "// @ts-expect-error openModel takes a model spec string",
        "void openModel(42);",
      ].join("\n"),
    );
    await exec(process.execPath, [tsc, "-p", "."], { cwd: project }).catch((err) => {
      throw new Error(`tsc failed:\n${err.stdout}${err.stderr}`);
    });
  });

  it("runs coa --help and reads the shipped base", async () => {
    const { stdout: help } = await coa(["--help"]);
    expect(help).toMatch(/Usage: coa/);
    expect(help).toMatch(/engine/);
    const { stdout: info } = await coa(["engine", "info", path.join(installed(), "models", "base")]);
    expect(info).toMatch(/tokenizer/);
  });

  it("serves the engine from the installed Python files", async () => {
    const cli = spawn(
      path.join(project, "node_modules", ".bin", "coa"),
      ["engine", "serve", "--preset", "micro", "--dtype", "fp32", "--port", "0"],
      { cwd: project, stdio: ["ignore", "pipe", "pipe"] },
    );
    let stderr = "";
    cli.stderr.on("data", (chunk) => {
      stderr += chunk;
    });
    const exited = new Promise<number | null>((resolve) => cli.on("exit", (code) => resolve(code)));
    try {
      const baseURL = await new Promise<string>((resolve, reject) => {
        createInterface({ input: cli.stdout }).once("line", resolve);
        exited.then((code) => reject(new Error(`coa engine serve exited with ${code}: ${stderr}`)));
      });
      const res = await fetch(`${baseURL}/completions`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ model: "coa-micro", prompt: "<think>", max_tokens: 4, seed: 1 }),
      });
      expect(res.status).toBe(200);
      const body = (await res.json()) as { choices: unknown[] };
      expect(body.choices).toHaveLength(1);
      cli.kill("SIGINT");
      expect(await exited).toBe(0);
    } finally {
      cli.kill("SIGKILL");
    }
  }, 120_000);
});
