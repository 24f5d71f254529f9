// The evaluation's speed (issue 18's last target: `coa eval` episodes per minute on the demo's test
// split at least 5× the first measurement's, whose 200 episodes took 52 s): the quick demo's student
// answers its 200 test tasks greedily, as every measurement in docs/engine.md ran it,
// COA_BENCH_EVAL_RUNS times (3). Prints each run's wall time, when the engine listened, the engine's busy
// time, the CPU seconds of coa, the engine and the rest of the machine (the sandboxes, mostly:
// process-cpu.ts), and whether every run produced the same token ids.
// `COA_BENCH_EVAL_DEMO=runs/demo-quick npm run bench -- eval` (a folder `coa demo --quick` made; about a
// minute). It runs `bin/coa.js` over the compiled CLI, as an installed coa runs (COA_BENCH_TSX=1: the
// sources through tsx, ~0.7 s slower here; coa-process.ts).

import { createHash } from "node:crypto";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { cpus, tmpdir } from "node:os";
import { join } from "node:path";
import { ARTIFACTS, readArtifact } from "../src/cli/artifacts.js";
import { EVAL_TRAJECTORIES_FILE } from "../src/eval/index.js";
import { WARM_SANDBOX_MARK } from "../src/tools/index.js";
import { pct } from "../src/util/index.js";
import { coaEntry, runCoa } from "./coa-process.js";
import { type CpuByKind, watchCpu } from "./process-cpu.js";

/** The first measurement's wall time for these 200 episodes (docs/engine.md), and the issue's factor. */
const FIRST_SECONDS = 52;
const TARGET_FACTOR = 5;

/** The processes of an evaluation: coa itself, the engine, the sandboxes' launcher, the warm sandboxes'
 * resident interpreters, and the rest (the probes coa runs for itself). */
function kindOf(cmdline: string): string {
  // First: a warm sandbox's command line holds zygote.py's text, which names the others.
  if (cmdline.includes(WARM_SANDBOX_MARK)) return "warm";
  if (cmdline.includes("coa_engine")) return "engine";
  if (cmdline.includes("launcher.py")) return "launcher";
  if (cmdline.includes("bin/coa.js") || cmdline.includes("src/cli/main.ts")) return "coa";
  return "other";
}

/** CPU seconds per process of a run, the rest of the machine's busy time (mostly the sandboxes, which
 * live too briefly to be read), and how many cores all of it kept busy over the run. */
function cpuLine({ kinds, machine }: CpuByKind, wallS: number): string {
  const read = Object.values(kinds).reduce((a, b) => a + b, 0);
  const of = (kind: string) => (kinds[kind] ?? 0).toFixed(1);
  const rest =
    machine === null
      ? ""
      : `, the rest of the machine (the sandboxes' programs, mostly) ${(machine - read).toFixed(1)}`;
  const all = machine ?? read;
  return (
    `CPU s: coa ${of("coa")}, engine ${of("engine")}, the sandboxes' launcher ${of("launcher")}, ` +
    `the warm sandboxes' interpreters ${of("warm")}, this bench ${of("watcher")}${rest}: ` +
    `${all.toFixed(1)} in all, ${(all / wallS).toFixed(2)} of ${cpus().length} cores`
  );
}

/** A digest of every episode's token ids by task, to tell whether two runs produced the same episodes. */
async function idsDigest(out: string): Promise<string> {
  const lines = (await readFile(join(out, EVAL_TRAJECTORIES_FILE), "utf8")).split("\n").filter(Boolean);
  const episodes = lines
    .map((line) => JSON.parse(line) as { taskId: string; segments: { ids?: number[] }[] })
    .map((t) => `${t.taskId}:${t.segments.map((s) => (s.ids ?? []).join(",")).join("|")}`)
    .sort();
  return createHash("sha256").update(episodes.join("\n")).digest("hex").slice(0, 12);
}

export async function run(): Promise<void> {
  const demo = process.env.COA_BENCH_EVAL_DEMO;
  if (!demo) {
    console.log(
      "skipped: set COA_BENCH_EVAL_DEMO to a finished quick demo (npx coa demo --quick --out runs/demo-quick)",
    );
    return;
  }
  const runs = Number(process.env.COA_BENCH_EVAL_RUNS ?? 3);
  const target = FIRST_SECONDS / TARGET_FACTOR;
  const args = (out: string) => [
    ...["eval", "--model", `engine:${join(demo, "sft", "last")}`, "--tasks", join(demo, "world")],
    ...["--split", "test", "--limit", "200", "--temperature", "0", "--max-turns", "8"],
    ...["--max-tokens-per-turn", "512", "--search-top-k", "3", "--out", out],
  ];
  const entry = coaEntry() === "built" ? "the compiled CLI, as installed" : "the sources through tsx";
  console.log(`command: coa ${args("OUT").join(" ")} (${runs} runs, each into a fresh OUT; ${entry})`);
  const digests = new Set<string>();
  for (let i = 0; i < runs; i++) {
    const out = await mkdtemp(join(tmpdir(), "coa-bench-eval-"));
    const seen: { listenS?: number; cpu?: ReturnType<typeof watchCpu> } = {};
    const r = await runCoa(args(out), {
      onStart: (pid) => {
        seen.cpu = watchCpu(pid, kindOf, 250, ["launcher", "warm"]); // fewer readings: each costs CPU the evaluation shares
      },
      onOutput: (text, seconds) => {
        if (seen.listenS === undefined && text.includes("listening on http")) seen.listenS = seconds;
      },
    });
    const cpu = await seen.cpu?.stop();
    if (r.code !== 0) {
      console.log(`run ${i + 1}: exit ${r.code}\n${r.output.slice(-2000)}`);
      return;
    }
    const summary = await readArtifact(out, ARTIFACTS.evalSummary);
    digests.add(await idsDigest(out));
    await rm(out, { recursive: true, force: true });
    const episodes = summary.success.tasks * summary.success.k;
    const wallS = 60 * r.minutes;
    // The engine's own line: busy seconds, on a core, of its wall.
    const engine = r.output.match(/engine: \d+ tokens generated in .*? of [\d.]+ s/)?.[0] ?? "no engine line";
    console.log(
      `run ${i + 1}: ${wallS.toFixed(2)} s, ${((60 * episodes) / wallS).toFixed(0)} episodes/min, pass@1 ${pct(summary.success.pass1)}; ` +
        `engine listening at ${seen.listenS?.toFixed(2) ?? "?"} s; ${engine}${cpu ? `; ${cpuLine(cpu, wallS)}` : ""}`,
    );
  }
  console.log(
    `token ids ${digests.size === 1 ? "identical in every run" : `differ between runs`} (digest ${[...digests].join(", ")}: ` +
      "compare it across versions for identical results); " +
      `target (issue 18): ≤ ${target.toFixed(1)} s, ${TARGET_FACTOR}× the first measurement's ${FIRST_SECONDS} s`,
  );
}
