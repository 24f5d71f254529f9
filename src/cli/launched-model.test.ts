import { execFile } from "node:child_process";
import path from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { promisify } from "node:util";
import { describe, expect, it } from "vitest";
import { commands } from "./commands/index.js";

const run = promisify(execFile);
const src = fileURLToPath(new URL("../", import.meta.url));
const repo = path.dirname(src);

/**
 * The project's modules and packages that importing `file` loads, as paths from the repository's root
 * (`src/…`, `node_modules/…`): a fresh node through tsx, with a resolve hook listing them.
 */
async function modulesLoadedBy(file: string): Promise<string[]> {
  const root = JSON.stringify(pathToFileURL(repo).href);
  const hooks = `export async function resolve(s, c, next) { const r = await next(s, c); if (r.url.startsWith(${root})) process.stderr.write("LOADED " + r.url + "\\n"); return r; }`;
  const script = [
    'import { register } from "node:module";',
    `register("data:text/javascript," + encodeURIComponent(${JSON.stringify(hooks)}));`,
    `await import(${JSON.stringify(pathToFileURL(file).href)});`,
  ].join("\n");
  const { stderr } = await run(process.execPath, ["--import", "tsx", "--input-type=module", "-e", script], {
    cwd: repo,
  });
  const loaded = stderr.split("\n").filter((line) => line.startsWith("LOADED "));
  return [...new Set(loaded.map((line) => path.relative(repo, fileURLToPath(line.slice(7)))))];
}

describe("commands that start their engine before loading themselves (withLaunchedModel)", () => {
  // The commands `coa` starts an engine for before loading them, which must take it over.
  it.each(commands.filter((c) => c.startsEngine).map((c) => c.name))(
    "coa %s's module loads no tools, tasks, agent loop or server",
    async (name) => {
      const loaded = await modulesLoadedBy(path.join(src, "cli", "commands", `${name}.ts`));
      const modules = loaded.filter((module) => module.startsWith("src/")).map((m) => m.slice(4));
      expect(modules).toContain(`cli/commands/${name}.ts`);
      // Only the flags' own modules and the model (which starts the engine); a heavy import here would
      // make the engine's start wait for it again (docs/engine.md, "`coa eval`'s start").
      const light = new RegExp(
        `^(cli/commands/${name}\\.ts|cli/(flags|agent-flags|launched-model|early-launch)\\.ts|model/|protocol/|runtime/defaults/)`,
      );
      expect(modules.filter((module) => !light.test(module))).toEqual([]);
    },
    60_000,
  );
});

describe("the engine's start from coa's raw arguments (startEarlyLaunch)", () => {
  it("loads the launch alone: no package, none of the model's clients", async () => {
    const loaded = await modulesLoadedBy(path.join(src, "cli", "early-launch.ts"));
    expect(loaded.filter((module) => !module.startsWith("node_modules/tsx/")).sort()).toEqual([
      "src/cli/early-launch.ts",
      "src/model/engine-launch.ts",
      "src/model/engine-process.ts",
      "src/model/engine-python.ts",
      "src/model/launch/index.ts",
    ]);
  }, 60_000);
});
