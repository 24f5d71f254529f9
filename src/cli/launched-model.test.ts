import { execFile } from "node:child_process";
import path from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { promisify } from "node:util";
import { describe, expect, it } from "vitest";

const run = promisify(execFile);
const src = fileURLToPath(new URL("../", import.meta.url));

/** The src/ modules that importing `file` loads: a fresh node through tsx, with a resolve hook listing them. */
async function modulesLoadedBy(file: string): Promise<string[]> {
  const root = JSON.stringify(pathToFileURL(src).href);
  const hooks = `export async function resolve(s, c, next) { const r = await next(s, c); if (r.url.startsWith(${root})) process.stderr.write("LOADED " + r.url + "\\n"); return r; }`;
  const script = [
    'import { register } from "node:module";',
    `register("data:text/javascript," + encodeURIComponent(${JSON.stringify(hooks)}));`,
    `await import(${JSON.stringify(pathToFileURL(file).href)});`,
  ].join("\n");
  const { stderr } = await run(process.execPath, ["--import", "tsx", "--input-type=module", "-e", script], {
    cwd: path.dirname(src),
  });
  const loaded = stderr.split("\n").filter((line) => line.startsWith("LOADED "));
  return [...new Set(loaded.map((line) => path.relative(src, fileURLToPath(line.slice(7)))))];
}

describe("commands that start their engine before loading themselves (withLaunchedModel)", () => {
  it.each(["eval", "run", "serve"])(
    "coa %s's module loads no tools, tasks, agent loop or server",
    async (name) => {
      const loaded = await modulesLoadedBy(path.join(src, "cli", "commands", `${name}.ts`));
      expect(loaded).toContain(`cli/commands/${name}.ts`);
      // Only the flags' own modules and the model (which starts the engine); a heavy import here would
      // make the engine's start wait for it again (docs/engine.md, "`coa eval`'s start").
      const light = new RegExp(
        `^(cli/commands/${name}\\.ts|cli/(flags|agent-flags|launched-model)\\.ts|model/|protocol/|runtime/defaults/)`,
      );
      expect(loaded.filter((module) => !light.test(module))).toEqual([]);
    },
    60_000,
  );
});
