import type { Command } from "commander";
import pc from "picocolors";
import { z } from "zod";
import {
  DistillConfig,
  type DistillOptions,
  EXPORT_FORMATS,
  type ExportFormat,
  funnelTable,
  loadDistillConfig,
  runDistill,
} from "../../distill/index.js";
import { tokenizerFlag } from "../../model/index.js";
import { ProfileName } from "../../protocol/index.js";
import { parseFlags } from "../flags.js";

/** The flags of `coa distill`, checked at the edge; --max-tokens and --profile override the config file. */
export const DistillFlags = z.object({
  traces: z.string().min(1),
  out: z.string().min(1),
  format: z.string(),
  maxTokens: z.coerce.number().int().positive().optional(),
  config: z.string().optional(),
  profile: ProfileName.optional(),
  split: z.string(),
  tokenizer: z.string().optional(),
});
export type DistillFlags = z.infer<typeof DistillFlags>;

/** `--tokenizer`: a tokenizer file, or `bpe:<vocab size>` to learn one from these traces. */
async function tokenizerFrom(flag: string | undefined): Promise<DistillOptions["tokenizer"]> {
  return flag === undefined ? undefined : tokenizerFlag(flag);
}

function parseFormats(list: string): ExportFormat[] {
  const formats = list
    .split(",")
    .map((f) => f.trim())
    .filter(Boolean);
  for (const f of formats)
    if (!(EXPORT_FORMATS as readonly string[]).includes(f))
      throw new Error(`--format: unknown format "${f}" (choose from ${EXPORT_FORMATS.join(", ")})`);
  return formats as ExportFormat[];
}

/** The config file (or defaults), with command-line flags taking precedence. */
async function configFrom(flags: DistillFlags): Promise<DistillConfig> {
  const cfg = flags.config ? await loadDistillConfig(flags.config) : DistillConfig.parse({});
  return {
    ...cfg,
    profile: flags.profile ?? cfg.profile,
    length: { ...cfg.length, maxTokens: flags.maxTokens ?? cfg.length.maxTokens },
  };
}

export function register(program: Command): void {
  program
    .command("distill")
    .description("turn MAS traces into filtered CoA trajectories and export SFT/RL data")
    .requiredOption("--traces <path>", "a trace JSONL file, or a folder of *trace*.jsonl (a `coa teach` run)")
    .requiredOption("--out <dir>", "output folder")
    .option(
      "--format <list>",
      `comma-separated exports: ${EXPORT_FORMATS.join(",")}`,
      EXPORT_FORMATS.join(","),
    )
    .option(
      "--max-tokens <n>",
      "longest kept trajectory, prompt included, in target tokens (overrides config)",
    )
    .option("--config <file>", "filter thresholds as JSON (see docs/distill.md); defaults otherwise")
    .option(
      "--profile <name>",
      `CoA profile to render for (${ProfileName.options.join("|")}); overrides config`,
    )
    .option("--split <name>", "split name written into verl rows", "train")
    .option(
      "--tokenizer <file|bpe:N>",
      "the target model's vocabulary: a tokenizer file, or bpe:N to learn an N-token BPE from these traces (default: bytes)",
    )
    .addHelpText(
      "after",
      "\nExamples:\n  coa distill --traces runs/teach --out runs/data --format native,llamafactory,verl --max-tokens 4096\n  coa distill --traces runs/teach --out runs/data --tokenizer bpe:2048   # learn a BPE for the embedded model",
    )
    .action(async (raw: Record<string, unknown>) => {
      const flags = parseFlags(DistillFlags, raw);
      const formats = parseFormats(flags.format);
      const config = await configFrom(flags);
      const tokenizer = await tokenizerFrom(flags.tokenizer);
      const tty = process.stderr.isTTY;
      const result = await runDistill({
        traces: flags.traces,
        out: flags.out,
        formats,
        config,
        split: flags.split,
        tokenizer,
        command: `coa ${process.argv.slice(2).join(" ")}`,
        onRead: (n) => process.stderr.write(tty ? `\rreading traces: ${n}` : `reading traces: ${n}\n`),
      });
      if (tty) process.stderr.write("\n");
      console.log(funnelTable(result.stages));
      console.log(
        `\n${pc.bold(String(result.kept.length))} trajectories kept, ${result.tasks} tasks for RL; wrote ${result.files.length} files to ${flags.out}`,
      );
      console.log(`  tokenizer ${result.tokenizer.name} (${result.tokenizer.vocabSize} tokens)`);
      for (const f of result.files.filter((f) => !f.path.startsWith("plots/")))
        console.log(`  ${f.path}${f.path.endsWith(".md") ? "" : ` (${f.records})`}`);
    });
}
