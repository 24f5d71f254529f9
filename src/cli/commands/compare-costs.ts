import { mkdir, writeFile } from "node:fs/promises";
import path from "node:path";
import type { Command } from "commander";
import { z } from "zod";
import { findTraceFiles } from "../../distill/index.js";
import {
  type CostComparison,
  type CostSystem,
  compareCosts,
  costComparisonReport,
  masTraceCost,
  reportMarkdown,
  trajectoryCostIn,
} from "../../eval/index.js";
import { findTokenizers } from "../../model/index.js";
import type { Trajectory } from "../../protocol/index.js";
import { MasTrace } from "../../teacher/index.js";
import { readJsonlTolerant } from "../../util/index.js";
import { ARTIFACTS, readRecords } from "../artifacts.js";
import { parseFlags } from "../flags.js";

/** The flags of `coa compare-costs`, checked at the edge. */
export const CompareCostsFlags = z.object({
  traces: z.array(z.string().min(1)).min(1),
  data: z.string().min(1),
  out: z.string().min(1),
});
export type CompareCostsFlags = z.infer<typeof CompareCostsFlags>;

/** `[name=]folder`: a system's label (default: the folder's name) and its trace folder or file. */
function labelled(arg: string): { name: string; dir: string } {
  const at = arg.indexOf("=");
  return at > 0 ? { name: arg.slice(0, at), dir: arg.slice(at + 1) } : { name: path.basename(arg), dir: arg };
}

async function readTraces(dir: string): Promise<MasTrace[]> {
  const files = await findTraceFiles(dir);
  return (await Promise.all(files.map((f) => readJsonlTolerant(f, MasTrace)))).flatMap((r) => r.records);
}

/**
 * Bills MAS traces (each `[name=]folder` as `coa teach` or `coa import` counted them) beside CoA
 * trajectories recounted in the traces' tokenizer, on the tasks they share, per task kind. The
 * trajectories' tokenizers are looked up in `tokenizerDir` (where distill or eval wrote them).
 * Writes costs.md and costs.json to `out`.
 */
export async function compareWithTraces(opts: {
  traces: readonly string[];
  trajectories: readonly Trajectory[];
  /** The CoA side's row label. */
  name: string;
  /** Where the traces' tokenizer file is (bytes need none). */
  tokenizerDir: string;
  /** The text of a trajectory's ids; default: decoded by the tokenizer files in `tokenizerDir`. */
  decoderOf?: (t: Trajectory) => ((ids: readonly number[]) => string) | null;
  out: string;
  command: string;
}): Promise<{ comparison: CostComparison; markdown: string }> {
  const mas = await Promise.all(
    opts.traces.map(labelled).map(async (m) => ({ ...m, traces: await readTraces(m.dir) })),
  );
  const names = new Set(mas.flatMap((m) => m.traces.map((t) => t.tokenizer)));
  if (names.size !== 1)
    throw new Error(
      `--traces: the traces must be counted in one tokenizer to be compared, found ${[...names].join(", ") || "no traces"}`,
    );
  const tokenizerName = [...names][0]!;
  const tokenizers = await findTokenizers([opts.tokenizerDir]);
  const counter = tokenizers.get(tokenizerName);
  if (!counter)
    throw new Error(
      `the traces were counted in ${tokenizerName}; put its tokenizer file in ${opts.tokenizerDir}`,
    );
  const count = (s: string) => counter.encode(s).length;
  const decoderOf =
    opts.decoderOf ??
    ((t: Trajectory) => {
      const own = tokenizers.get(t.tokenizer);
      return own ? (ids: readonly number[]) => own.decode(ids) : null;
    });
  const kindOf = new Map(mas.flatMap((m) => m.traces.map((t) => [t.taskId, t.taskKind] as const)));
  const systems: CostSystem[] = [
    ...mas.map((m) => ({
      name: m.name,
      episodes: m.traces.map((t) => ({ taskId: t.taskId, cost: masTraceCost(t, count) })),
    })),
    {
      name: opts.name,
      episodes: opts.trajectories.flatMap((t) => {
        const decode = decoderOf(t);
        if (!t.taskId || !decode) return [];
        return [{ taskId: t.taskId, cost: trajectoryCostIn(t, true, decode, count) }];
      }),
    },
  ];
  // Every shared task has a trace in each --traces folder, so its kind is known.
  const comparison = compareCosts(systems, (id) => kindOf.get(id)!);
  await mkdir(opts.out, { recursive: true });
  const markdown = reportMarkdown(costComparisonReport(comparison, opts.command, tokenizerName));
  await writeFile(path.join(opts.out, "costs.md"), markdown);
  const record = { command: opts.command, tokenizer: tokenizerName, ...comparison };
  await writeFile(path.join(opts.out, "costs.json"), `${JSON.stringify(record, null, 2)}\n`);
  return { comparison, markdown };
}

/** Runs `coa compare-costs`: MAS traces beside the distilled trajectories of `--data`. */
export async function runCompareCosts(
  flags: CompareCostsFlags,
  command: string,
): Promise<{ comparison: CostComparison; markdown: string }> {
  const trajectories = await readRecords(flags.data, ARTIFACTS.distilled);
  return compareWithTraces({
    traces: flags.traces,
    trajectories,
    name: "CoA trajectory",
    tokenizerDir: flags.data,
    out: flags.out,
    command,
  });
}

export function register(program: Command): void {
  program
    .command("compare-costs")
    .description(
      "tokens per task, billed and prefix-cached, of multi-agent systems and the CoA trajectory on the tasks they share, per task kind",
    )
    .requiredOption(
      "--traces <[name=]dir...>",
      "MAS trace folders or files (`coa teach`, `coa import`), each labelled by name= or its folder",
    )
    .requiredOption("--data <dir>", "a `coa distill` folder: native.jsonl and tokenizer.json")
    .requiredOption("--out <dir>", "output folder: costs.md, costs.json")
    .addHelpText(
      "after",
      "\nExample:\n  coa compare-costs --traces team=runs/team-imported --traces teacher=runs/teach-test --data runs/data-test --out runs/costs\n\nEvery side is counted in the tokenizer the traces were counted in (`--tokenizer` of teach and import).",
    )
    .action(async (raw: Record<string, unknown>) => {
      const command = `coa ${process.argv.slice(2).join(" ")}`;
      const flags = parseFlags(CompareCostsFlags, raw);
      process.stdout.write((await runCompareCosts(flags, command)).markdown);
    });
}
