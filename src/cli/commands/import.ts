import type { Command } from "commander";
import pc from "picocolors";
import { z } from "zod";
import { IMPORT_FORMATS, issueText, loadRoleTable, RoleTable, runImport } from "../../importers/index.js";
import { ByteTokenizer, readTokenizerFile } from "../../model/index.js";
import { loadTasks } from "../../tasks/index.js";
import { parseFlags } from "../flags.js";

/** The flags of `coa import` (the trace file or folder is its argument), checked at the edge. */
export const ImportFlags = z.object({
  from: z.enum(IMPORT_FORMATS),
  tasks: z.string().min(1),
  split: z.string().min(1),
  out: z.string().min(1),
  roles: z.string().optional(),
  tokenizer: z.string().optional(),
});

export function register(program: Command): void {
  program
    .command("import")
    .description("turn another framework's agent traces into MAS traces for `coa distill`")
    .argument("<input>", "a trace file, or a folder of *.jsonl / *.json files")
    .requiredOption("--from <format>", `trace format: ${IMPORT_FORMATS.join("|")}`)
    .requiredOption(
      "--tasks <path>",
      "the tasks the traces solved (gold answers): a task file or world directory",
    )
    .option("--split <name>", "split of a world directory", "train")
    .requiredOption("--out <dir>", "output folder (traces.jsonl, import.json)")
    .option("--roles <file>", "JSON {agents: {name: role}, tools: {name: tag}} overriding the name patterns")
    .option("--tokenizer <file>", "count tokens in this vocabulary (default: bytes), e.g. the student's")
    .addHelpText(
      "after",
      [
        "",
        "Formats:",
        "  openai-agents      the JSONL a JsonlTraceProcessor writes (@openai/agents traces): exact costs",
        "  openai-agents-run  a run's result: result.state.toString() (one per line or a JSON array for several",
        "                     runs, agents-as-tools' nested runs included), or JSON.stringify(result.history);",
        "                     each call's input is rebuilt from the items, without instructions or tool schemas",
        "  otel               OTLP/JSON with GenAI spans (invoke_agent, execute_tool, chat)",
        "  generic            one coa-generic/1 JSON object per line",
        "",
        "Examples:",
        "  coa import runs/agents/spans.jsonl --from openai-agents --tasks runs/world --split test --out runs/imported",
        "  coa import runs/agents/run.json --from openai-agents-run --tasks runs/world --split test --out runs/imported",
        "  coa import otel.json --from otel --tasks tasks.jsonl --roles roles.json --out runs/imported",
        "",
        "Formats and the role table: docs/import.md",
      ].join("\n"),
    )
    .action(async (input: string, raw: Record<string, unknown>) => {
      const flags = parseFlags(ImportFlags, raw);
      const { tasks } = await loadTasks(flags.tasks, { split: flags.split });
      const summary = await runImport({
        input,
        from: flags.from,
        tasks,
        roles: flags.roles ? await loadRoleTable(flags.roles) : RoleTable.parse({}),
        tokenizer: flags.tokenizer ? await readTokenizerFile(flags.tokenizer) : new ByteTokenizer(),
        out: flags.out,
      });
      for (const issue of summary.issues) console.error(pc.yellow(issueText(issue)));
      const unusable = Object.entries(summary.unusable).map(([r, n]) => `${r} ${n}`);
      console.log(
        `${summary.found} traces in ${summary.files.length} file(s); wrote ${pc.bold(String(summary.written))} to ${flags.out}/traces.jsonl (solved ${summary.solved}${unusable.length ? `; not distillable: ${unusable.join(", ")}` : ""}); ${summary.issues.length} input problem(s)`,
      );
      if (summary.guessedAgents.length)
        console.log(`  agents placed by default (name them in --roles): ${summary.guessedAgents.join(", ")}`);
    });
}
