import type { Command } from "commander";
import { type LoadedTasks, loadTasks, printable, TaskKind } from "../../tasks/index.js";
import { oneLine } from "../../util/index.js";

const QUESTION_CHARS = 160;

function counts(values: string[]): string {
  const tally = new Map<string, number>();
  for (const v of values) tally.set(v, (tally.get(v) ?? 0) + 1);
  return [...tally].map(([k, n]) => `${k} ${n}`).join(", ");
}

/** The report `coa tasks inspect` prints: format, counts per kind and source, skipped rows, samples. */
export function inspectTasks(loaded: LoadedTasks, samples: number): string {
  const { tasks, skipped } = loaded;
  const lines = [
    `${loaded.file}: ${loaded.format}, ${tasks.length} tasks${skipped.length ? `, ${skipped.length} rows skipped` : ""}`,
    `kinds: ${counts(tasks.map((t) => t.kind)) || "none"}`,
    `sources: ${counts(tasks.map((t) => t.source)) || "none"}`,
  ];
  for (const s of skipped.slice(0, 10))
    lines.push(`skipped ${s.where}${s.field ? ` (${s.field})` : ""}: ${s.reason}`);
  if (skipped.length > 10) lines.push(`… and ${skipped.length - 10} more skipped rows`);
  for (const t of tasks.slice(0, samples)) {
    lines.push("", `[${t.id}] ${t.kind} · ${t.source}`, `  question: ${oneLine(t.question, QUESTION_CHARS)}`);
    if (t.answers.length) lines.push(`  answers: ${oneLine(t.answers.join(" | "), QUESTION_CHARS)}`);
    const tests = Array.isArray(t.meta.tests) ? t.meta.tests.length : 0;
    if (t.kind === "code")
      lines.push(`  tests: ${tests} stdin${t.meta.functional ? " + assert snippet" : ""}`);
    lines.push(`  meta: ${Object.keys(t.meta).join(", ") || "none"}`);
  }
  // Questions, ids and paths come from the file: escape sequences in them must not reach the terminal.
  return lines.map(printable).join("\n");
}

export function register(program: Command): void {
  const tasks = program.command("tasks").description("load and inspect task files");
  tasks
    .command("inspect")
    .description("load a benchmark file or world directory and print counts per kind and sample rows")
    .argument("<path>", "parquet, JSONL, JSON file, or a world directory")
    .option("--limit <n>", "sample rows to print", "3")
    .option("--split <split>", "split of a world directory (train, rl, dev, test)")
    .option("--map <mapping>", "field mapping for other JSONL/JSON layouts, e.g. question=q,answers=golds")
    .option("--kind <kind>", `kind of mapped rows (${TaskKind.options.join("|")})`)
    .option("--source <name>", "source name of mapped rows")
    .option("--skip-bad", "skip rows that cannot be loaded, counting them, instead of stopping")
    .action(
      async (
        path: string,
        opts: {
          limit: string;
          split?: string;
          map?: string;
          kind?: string;
          source?: string;
          skipBad?: boolean;
        },
      ) => {
        const limit = Number(opts.limit);
        if (!Number.isInteger(limit) || limit < 0)
          throw new Error(`--limit: expected a whole number, got "${opts.limit}"`);
        const kind = opts.kind === undefined ? undefined : TaskKind.safeParse(opts.kind);
        if (kind && !kind.success)
          throw new Error(`--kind: expected one of ${TaskKind.options.join(", ")}, got "${opts.kind}"`);
        const loaded = await loadTasks(path, {
          split: opts.split,
          map: opts.map,
          kind: kind?.data,
          source: opts.source,
          skipBad: opts.skipBad,
        });
        console.log(inspectTasks(loaded, limit));
      },
    );
}
