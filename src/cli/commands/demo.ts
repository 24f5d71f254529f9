import { mkdir, readFile, writeFile } from "node:fs/promises";
import path from "node:path";
import type { Command } from "commander";
import { readCheckpointManifest } from "../../model/index.js";
import { LAST_LINK } from "../../train/index.js";
import { oneLine } from "../../util/index.js";
import { ARTIFACTS } from "../artifacts.js";
import { commandArgs } from "../command-args.js";
import { checkPresetSeeds, DEMO_PRESETS, DemoPreset } from "../demo/presets.js";
import { type StageTiming, writeDemoReport } from "../demo/report.js";
import { demoRlConfig, demoStages, runStage } from "../demo/stages.js";

/**
 * The stages a demo folder has finished, for a run with `preset`; a folder of another preset, or one
 * started with other settings (a `--config`, or a preset changed since), is refused, naming them.
 */
export async function readDemoProgress(file: string, preset: DemoPreset): Promise<StageTiming[]> {
  const raw = await readFile(file, "utf8").catch(() => null);
  if (raw === null) return [];
  const parsed = ARTIFACTS.demoProgress.schema.safeParse(JSON.parse(raw));
  if (!parsed.success) throw new Error(`${file}: not a demo progress file; remove it to start over`);
  if (parsed.data.preset !== preset.name)
    throw new Error(
      `${path.dirname(file)} holds a --${parsed.data.preset} demo; use another --out or the same preset`,
    );
  const changed = parsed.data.settings ? changedSettings(parsed.data.settings, preset) : [];
  if (changed.length) {
    const listed =
      changed.slice(0, 6).join("; ") + (changed.length > 6 ? `; ${changed.length - 6} more` : "");
    throw new Error(
      `${path.dirname(file)} was started with other settings (${listed}): a --config, or a preset changed since; use another --out or the same settings`,
    );
  }
  return parsed.data.done;
}

/** `field was → now` for each setting that differs between a folder's recorded settings and `preset`. */
function changedSettings(recorded: Record<string, unknown>, preset: DemoPreset): string[] {
  const now: Record<string, unknown> = preset;
  const shown = (v: unknown) => (v === undefined ? "unset" : oneLine(JSON.stringify(v), 40));
  return [...new Set([...Object.keys(recorded), ...Object.keys(now)])]
    .filter((k) => JSON.stringify(recorded[k]) !== JSON.stringify(now[k]))
    .map((k) => `${k} ${shown(recorded[k])} → ${shown(now[k])}`);
}

export async function runDemo(preset: DemoPreset, out: string, log: (line: string) => void): Promise<void> {
  await mkdir(out, { recursive: true });
  const doneFile = path.join(out, ARTIFACTS.demoProgress.file);
  const done = await readDemoProgress(doneFile, preset);
  const stages = demoStages(preset, out);
  log(
    `coa demo --${preset.name}: ${stages.length} stages into ${out}; about ${preset.estimateMinutes} min on 2 cores` +
      (done.length ? ` (resuming: ${done.length} done)` : ""),
  );
  for (const [i, stage] of stages.entries()) {
    if (done.some((d) => d.name === stage.name)) continue;
    if (stage.name === "rl") await writeRlConfig(preset, out);
    log(`\n[${i + 1}/${stages.length}] ${stage.title}: coa ${commandArgs(stage.command).join(" ")}`);
    const started = performance.now();
    await runStage(stage);
    done.push({ name: stage.name, title: stage.title, seconds: (performance.now() - started) / 1000 });
    await writeFile(
      doneFile,
      `${JSON.stringify({ preset: preset.name, settings: preset, done }, null, 2)}\n`,
    );
  }
  const { report } = await writeDemoReport(out, preset, done);
  const results = report.sections[0]!;
  log(
    `\n${results.blocks.map((b) => (b.kind === "table" ? [b.header, ...b.rows].map((r) => r.join(" | ")).join("\n") : b.kind === "text" ? b.text : "")).join("\n\n")}`,
  );
  log(`\nreport: ${path.join(out, "report.md")} and report.html; browse trajectories with: coa view ${out}`);
}

/** RL's config file, for the context of the SFT checkpoint it starts from (a resumed run computes the same). */
async function writeRlConfig(preset: DemoPreset, out: string): Promise<void> {
  const manifest = await readCheckpointManifest(path.join(out, "sft", LAST_LINK));
  const context = manifest.model?.max_seq_len;
  if (!context)
    throw new Error(`${path.join(out, "sft", LAST_LINK)}: the checkpoint names no context length`);
  const config = demoRlConfig(preset, context);
  await writeFile(path.join(out, ARTIFACTS.rlConfig.file), `${JSON.stringify(config, null, 2)}\n`);
}

/** A preset with the fields of a JSON file laid over it; unknown or ill-typed fields are refused. */
export async function presetWithOverrides(base: DemoPreset, file: string): Promise<DemoPreset> {
  let raw: unknown;
  try {
    raw = JSON.parse(await readFile(file, "utf8"));
  } catch (err) {
    throw new Error(`--config ${file}: ${(err as Error).message}`);
  }
  const fields = DemoPreset.partial().omit({ name: true }).strict().safeParse(raw);
  if (!fields.success) {
    const issue = fields.error.issues[0]!;
    throw new Error(`--config ${file}: ${issue.path.join(".") || "(top level)"}: ${issue.message}`);
  }
  return DemoPreset.parse({ ...base, ...fields.data });
}

export function register(program: Command): void {
  program
    .command("demo")
    .description(
      "the whole paper on one machine, offline: world → teacher MAS → distill → SFT → RL → evaluate → report (resumable)",
    )
    .option("--quick", `about ${DEMO_PRESETS.quick.estimateMinutes} minutes, to try it`)
    .option("--full", "the largest preset (hours on 2 cores)")
    .option("--out <dir>", "demo folder (default runs/demo, runs/demo-quick with --quick)")
    .option(
      "--config <json>",
      'a JSON file of preset fields to change, e.g. {"sftSteps": 2000} (see docs/eval.md)',
    )
    .action(async (opts: { quick?: boolean; full?: boolean; out?: string; config?: string }) => {
      if (opts.quick && opts.full) throw new Error("choose one of --quick and --full");
      const base = DEMO_PRESETS[opts.quick ? "quick" : opts.full ? "full" : "default"];
      const preset = checkPresetSeeds(opts.config ? await presetWithOverrides(base, opts.config) : base);
      const out = opts.out ?? path.join("runs", preset.name === "default" ? "demo" : `demo-${preset.name}`);
      await runDemo(preset, out, (line) => process.stdout.write(`${line}\n`));
    });
}
