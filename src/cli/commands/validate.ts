import type { Command } from "commander";
import { findTokenizers, type Tokenizer } from "../../model/index.js";
import { checkTrajectory, ProfileName, Trajectory, type TrajectoryProblem } from "../../protocol/index.js";
import { jsonlLines } from "../../util/index.js";

interface Summary {
  records: number;
  invalid: number;
  /** Records whose ids could not be decoded (foreign tokenizer): schema-checked only. */
  undecoded: Map<string, number>;
  byKind: Map<string, number>;
}

/** `coa validate <file>`: checks trajectory JSONL against the schema and the protocol, line by line. */
export function register(program: Command): void {
  program
    .command("validate")
    .description("check trajectory JSONL records against the schema and the CoA protocol; errors by line")
    .argument("<trajectories>", "trajectory JSONL file")
    .option(
      "--profile <profile>",
      `check every record against this profile (${ProfileName.options.join("|")})`,
    )
    .action(async (file: string, opts: { profile?: string }) => {
      const profile = opts.profile === undefined ? undefined : ProfileName.safeParse(opts.profile);
      if (profile && !profile.success)
        throw new Error(`--profile must be one of ${ProfileName.options.join(", ")}, got ${opts.profile}`);
      const summary = await validateFile(file, profile?.data, (line) => process.stdout.write(`${line}\n`));
      process.stdout.write(`${formatSummary(file, summary)}\n`);
      if (summary.invalid > 0 || summary.records === 0) process.exitCode = 1;
    });
}

/** Validates every non-blank line, reporting each problem as `file:line: field: message`. */
export async function validateFile(
  file: string,
  profile: ProfileName | undefined,
  report: (line: string) => void,
): Promise<Summary> {
  const tokenizers = await findTokenizers([file]);
  const summary: Summary = { records: 0, invalid: 0, undecoded: new Map(), byKind: new Map() };
  for await (const { line: lineNo, text } of jsonlLines(file)) {
    summary.records++;
    const problems = checkLine(text, profile, tokenizers, summary);
    if (problems.length === 0) continue;
    summary.invalid++;
    for (const p of problems) {
      const kind = p.kind ?? "record";
      summary.byKind.set(kind, (summary.byKind.get(kind) ?? 0) + 1);
      const where = p.span ? ` (characters ${p.span.start}-${p.span.end})` : "";
      report(`${file}:${lineNo}: ${p.field}: ${p.kind ? `${p.kind}: ` : ""}${p.message}${where}`);
    }
  }
  return summary;
}

function checkLine(
  line: string,
  profile: ProfileName | undefined,
  tokenizers: ReadonlyMap<string, Tokenizer>,
  summary: Summary,
): TrajectoryProblem[] {
  let json: unknown;
  try {
    json = JSON.parse(line);
  } catch (err) {
    return [
      { field: "(line)", message: `invalid JSON: ${err instanceof Error ? err.message : String(err)}` },
    ];
  }
  const parsed = Trajectory.safeParse(json);
  if (!parsed.success)
    return parsed.error.issues.map((issue) => ({
      field: issue.path.map(String).join(".") || "(record)",
      message: issue.message,
    }));
  const record = parsed.data;
  const tokenizer = tokenizers.get(record.tokenizer);
  if (!tokenizer) {
    summary.undecoded.set(record.tokenizer, (summary.undecoded.get(record.tokenizer) ?? 0) + 1);
    return [];
  }
  return checkTrajectory(record, (ids) => tokenizer.decode(ids), { profile }).problems;
}

function formatSummary(file: string, s: Summary): string {
  const parts = [`${file}: ${s.records} records, ${s.records - s.invalid} valid, ${s.invalid} invalid`];
  if (s.byKind.size > 0)
    parts.push(`problems: ${[...s.byKind].map(([kind, n]) => `${kind} ${n}`).join(", ")}`);
  for (const [name, n] of s.undecoded)
    parts.push(
      `${n} with tokenizer ${JSON.stringify(name)} checked against the schema only (no tokenizer file of that name beside it)`,
    );
  if (s.records === 0) parts.push("no records");
  return parts.join("; ");
}
