import { readFile, writeFile } from "node:fs/promises";
import path from "node:path";
import {
  type CopyRate,
  type CostSummary,
  costSummary,
  type EvalSummaryFile,
  type EvalTrajectory,
  masTraceCost,
  type PairedDifference,
  pairedDifference,
  type Report,
  type ReportBlock,
  reduction,
  reportHtml,
  reportMarkdown,
  type SuccessMetrics,
  successByKind,
  trajectoryCostIn,
} from "../../eval/index.js";
import { ByteTokenizer, readTokenizerFile, TOKENIZER_FILE, type Tokenizer } from "../../model/index.js";
import { completionIds, parseCoa, type Trajectory } from "../../protocol/index.js";
import type { MasTrace } from "../../teacher/index.js";
import { pct } from "../../util/index.js";
import { ARTIFACTS, readArtifact, readRecords } from "../artifacts.js";
import type { DemoPreset } from "./presets.js";
import { demoRlTemperature, SAMPLED_EVAL_DIRS } from "./stages.js";

const bytes = new ByteTokenizer();
/** A token cut as prose: "55.4% fewer", or "17.1× more" when the student spent more. */
const fewer = (cut: number) => (cut >= 0 ? `${pct(cut)} fewer` : `${(1 - cut).toFixed(1)}× more`);
const num = (x: number | null) => (x === null ? "–" : Math.round(x).toLocaleString("en-US"));

async function figure(file: string, caption: string, reportDir: string): Promise<ReportBlock[]> {
  try {
    return [
      { kind: "figure", file: path.relative(reportDir, file), svg: await readFile(file, "utf8"), caption },
    ];
  } catch {
    return [{ kind: "text", text: `(${caption}: no plot was written)` }];
  }
}

interface SystemRow {
  name: string;
  success: number;
  cost: CostSummary;
  formatErrorRate: number | null;
}

function resultsTable(rows: SystemRow[]): ReportBlock {
  return {
    kind: "table",
    header: [
      "system",
      "success (pass@1)",
      "tokens / task",
      "tokens / solved task",
      "… with a prefix cache",
      "model calls / task",
      "tool calls / task",
      "format-error rate",
    ],
    rows: rows.map((r) => [
      r.name,
      pct(r.success),
      num(r.cost.billedTokensPerTask),
      num(r.cost.billedTokensPerSolvedTask),
      num(r.cost.processedTokensPerSolvedTask),
      r.cost.modelCallsPerTask.toFixed(2),
      r.cost.toolCallsPerTask.toFixed(2),
      r.formatErrorRate === null ? "–" : pct(r.formatErrorRate),
    ]),
  };
}

/** Said where an eval summary from before `byKind`, `taskScores` or `copy` existed lacks one. */
const RERUN = `(not in this ${ARTIFACTS.evalSummary.file}: rerun \`coa eval\` to add it)`;

/** Success of each system on each task kind, of how many tasks: pass@1, and avg@k too when k > 1. */
function kindsTable(
  systems: { name: string; byKind?: Record<string, SuccessMetrics> }[],
  k: number,
): ReportBlock {
  const kinds = [...new Set(systems.flatMap((s) => Object.keys(s.byKind ?? {})))].sort();
  const cell = (m: SuccessMetrics | undefined) =>
    m === undefined ? "–" : `${k > 1 ? `${pct(m.pass1)} / ${pct(m.avgK)}` : pct(m.pass1)} of ${m.tasks}`;
  return {
    kind: "table",
    header: ["task kind", ...systems.map((s) => `${s.name} (${k > 1 ? "pass@1 / avg@k" : "pass@1"})`)],
    rows: kinds.map((kind) => [kind, ...systems.map((s) => cell(s.byKind?.[kind]))]),
  };
}

const copyCell = (r: CopyRate | undefined) =>
  r === undefined ? RERUN : r.rate === null ? "–" : `${pct(r.rate)} (${r.copied} of ${r.episodes})`;

/** A difference of success rates in points, signed: "+2.0", "−1.5". */
const points = (x: number) => `${x < 0 ? "−" : "+"}${Math.abs(100 * x).toFixed(1)}`;

/** Issue 15's target for RL: at least this far above SFT, paired per task. */
export const RL_GAIN_TARGET = 0.05;

/** Whether a paired gain reaches the target with its whole 95% interval above 0 (not by noise). */
export function reachesRlGainTarget(d: Pick<PairedDifference, "mean" | "low">): boolean {
  return d.mean !== null && d.low !== null && d.low > 0 && d.mean >= RL_GAIN_TARGET;
}

/** RL's gain over SFT paired per task; null when a summary predates per-task scores. */
export function rlPairedGain(sft: EvalSummaryFile, rl: EvalSummaryFile): PairedDifference | null {
  return sft.taskScores && rl.taskScores ? pairedDifference(rl.taskScores, sft.taskScores) : null;
}

/**
 * The evaluations of SFT and RL sampled at the RL temperature (preset `rlEvalK`), which RL's gain is
 * read from; null when the demo ran none (or an older one, or a stage is missing).
 */
export async function readSampledEvals(out: string) {
  const [sft, rl] = await Promise.all(
    [SAMPLED_EVAL_DIRS.sft, SAMPLED_EVAL_DIRS.rl].map((d) =>
      readArtifact(path.join(out, d), ARTIFACTS.evalSummary).catch(() => null),
    ),
  );
  return sft && rl ? { sft, rl } : null;
}

/** RL's gain over SFT, task by task, and whether its interval tells it apart from noise. */
function pairedGain(d: PairedDifference | null, k: number, temperature: number | null): string {
  if (d === null) return `RL's paired gain over SFT: per-task scores ${RERUN}.`;
  if (d.mean === null) return "RL's paired gain over SFT: the two evaluations share no task.";
  const interval =
    d.low === null || d.high === null
      ? "too few tasks for an interval"
      : `95% CI ${points(d.low)} to ${points(d.high)} points`;
  const verdict =
    d.low === null
      ? ""
      : d.low > 0
        ? "; the interval excludes 0, so RL's gain is more than noise"
        : d.high! < 0
          ? "; the interval is below 0: RL made the model worse"
          : "; the interval includes 0, so no gain is shown";
  const target = reachesRlGainTarget(d) ? "reached" : "**not reached**";
  const sampled = temperature === null ? "" : ` sampled at temperature ${temperature}`;
  return `RL's paired gain over SFT (avg@${k} per task${sampled}, on the same ${d.tasks} test tasks): **${points(d.mean)} points** (${interval})${verdict}. Target ≥ +${100 * RL_GAIN_TARGET} points with the interval above 0: ${target}.`;
}

/** Three trajectories that show the model at work: a solved one, a failed one, and the longest. */
function examples(records: readonly EvalTrajectory[], tokenizer: Tokenizer): ReportBlock[] {
  if (!records.length) return [{ kind: "text", text: "(no trajectories)" }];
  const solved = records.find((t) => (t.reward ?? 0) >= 1);
  const failed = records.find((t) => (t.reward ?? 0) < 1);
  const longest = [...records].sort((a, b) => b.stats.modelTokens - a.stats.modelTokens)[0];
  const picks = [solved, failed, longest].filter(
    (t, i, all): t is EvalTrajectory => !!t && all.indexOf(t) === i,
  );
  return picks.flatMap((t) => {
    const text = tokenizer.decode(completionIds(t));
    const errors = parseCoa(text).errors.length;
    const gold = t.meta.eval.answers.join(" | ") || "?";
    return [
      {
        kind: "text",
        text: `**${t.question}** — answer \`${t.answer ?? "none"}\`, gold \`${gold}\`, reward ${t.reward ?? "–"}, finish ${t.finishReason}, ${t.stats.modelTokens} model tokens, ${errors} parse errors`,
      },
      {
        kind: "code",
        text: text.length > 2500 ? `${text.slice(0, 2500)}\n…[${text.length - 2500} more characters]` : text,
      },
    ] satisfies ReportBlock[];
  });
}

/**
 * A handful of solved tasks is easy to over-read: name their answers, so a reader can see when
 * they are one common value guessed from a small answer set rather than found.
 */
function fewSolved(records: readonly Trajectory[], system: string): string {
  const answers = records.filter((t) => (t.reward ?? 0) >= 1).map((t) => `\`${t.answer ?? ""}\``);
  if (!answers.length || answers.length > 5) return "";
  return ` ${system} solved ${answers.length} of ${records.length} test episodes, answering ${answers.join(", ")}; with so few, check the examples below for whether they were found or guessed.`;
}

/** Only the fields of RL's metrics that say whether it had anything to learn from, so older runs read too. */
const RL_SIGNAL = {
  ...ARTIFACTS.rlMetrics,
  schema: ARTIFACTS.rlMetrics.schema.pick({
    success: true,
    samples: true,
    groups_kept: true,
    groups_drawn: true,
  }),
};

/** Why RL could not move success, in numbers from its own rollouts in `runDir`. */
async function rlSignal(runDir: string): Promise<string> {
  const steps = await readRecords(runDir, RL_SIGNAL).catch(() => []);
  if (!steps.length) return "";
  const solved = steps.reduce((n, s) => n + Math.round(s.success * s.samples), 0);
  const samples = steps.reduce((n, s) => n + s.samples, 0);
  const kept = steps.reduce((n, s) => n + s.groups_kept, 0);
  const drawn = steps.reduce((n, s) => n + s.groups_drawn, 0);
  const why =
    kept === 0
      ? "it made no update at all"
      : !solved
        ? "it had no success to reinforce, only penalties"
        : 2 * kept < drawn
          ? "its signal was thin"
          : "it had signal to learn from, yet test success did not move beyond noise";
  return ` RL rollouts solved ${solved} of ${samples} episodes over ${steps.length} step${steps.length === 1 ? "" : "s"}; GRPO learns only from groups whose rewards differ (${kept} of ${drawn} groups), so ${why}.`;
}

export interface StageTiming {
  name: string;
  title: string;
  seconds: number;
}

/** Where the student started, as the report's set-up line says it. */
function baseWords(p: DemoPreset): string {
  if (p.base === "none") return "the student started from random weights";
  if (p.base === "pretrain") return "the student started from a base this demo pretrained on other worlds";
  return `the student started from the base model the package ships in ${p.baseDir}, ${p.baseAbout} (${p.baseDir}/BASE.md)`;
}

const TEAM_NAME = "Same team on @openai/agents (expert driver)";

/** A multi-agent system's test episodes: success, cost and success per kind, counted with `count`. */
function masResults(traces: MasTrace[], count: (text: string) => number) {
  const episodes = traces.map((t) => masTraceCost(t, count));
  const cost = costSummary(episodes);
  const byKind = successByKind(
    traces.map((t, i) => ({
      taskId: t.taskId,
      kind: t.taskKind,
      samples: [{ correct: episodes[i]!.solved, error: null, selfScore: null }],
    })),
  );
  return { success: cost.solved / (cost.episodes || 1), cost, byKind };
}

/** The paper's cost claim for one CoA model against one multi-agent system, billed and cached. */
function costFinding(model: string, cost: CostSummary, system: string, theirs: CostSummary): string {
  if (theirs.billedTokensPerSolvedTask === null)
    return `Tokens per solved task cannot be compared with ${system}: it solved no test task.`;
  const cut = reduction(cost.billedTokensPerSolvedTask!, theirs.billedTokensPerSolvedTask);
  const cachedCut = reduction(cost.processedTokensPerSolvedTask!, theirs.processedTokensPerSolvedTask!);
  return `Tokens per solved task, ${model} vs ${system}: ${fewer(cut)} as billed (target ≥ 80%; the paper reports 84.6%)${cut >= 0.8 ? "" : " — target not reached"}; ${fewer(cachedCut)} when both sides reuse a prefix cache.`;
}

/** Writes report.md and report.html into the demo folder from what the stages wrote there. */
export async function writeDemoReport(
  out: string,
  preset: DemoPreset,
  timings: StageTiming[],
): Promise<{ markdown: string; html: string; report: Report }> {
  const at = (...p: string[]) => path.join(out, ...p);
  // The student's vocabulary (distill writes it; the test-split teacher was counted in it too).
  const tokenizer = await readTokenizerFile(at("data", TOKENIZER_FILE)).catch(() => bytes);
  const count = (s: string) => tokenizer.encode(s).length;
  const teacher = masResults(await readRecords(at("teach-test"), ARTIFACTS.masTraces), count);
  // The same team on @openai/agents (stages team-test and import-team); a demo folder from before
  // those stages has none, and the report leaves the framework out.
  const team = await readRecords(at("team-traces"), ARTIFACTS.masTraces).then(
    (traces) => (traces.length ? masResults(traces, count) : null),
    () => null,
  );
  const sft = await readArtifact(at("eval-sft"), ARTIFACTS.evalSummary);
  const rl = await readArtifact(at("eval-rl"), ARTIFACTS.evalSummary);
  const gain = rlPairedGain(sft, rl);
  const sampled = await readSampledEvals(out);
  const rlTemperature = demoRlTemperature(preset);
  const rlEpisodes = await readRecords(at("eval-rl"), ARTIFACTS.evalTrajectories);
  const rows: SystemRow[] = [
    { name: "Teacher MAS (expert driver)", ...teacher, formatErrorRate: null },
    ...(team ? [{ name: TEAM_NAME, ...team, formatErrorRate: null }] : []),
    {
      name: `AFM-SFT (${sft.model})`,
      success: sft.success.pass1,
      cost: sft.cost,
      formatErrorRate: sft.formatErrorRate,
    },
    {
      name: `AFM-RL (${rl.model})`,
      success: rl.success.pass1,
      cost: rl.cost,
      formatErrorRate: rl.formatErrorRate,
    },
    ...(sampled
      ? (["sft", "rl"] as const).map((m) => ({
          name: `AFM-${m.toUpperCase()}, avg@${sampled[m].success.k} at temperature ${rlTemperature}`,
          success: sampled[m].success.avgK,
          cost: sampled[m].cost,
          formatErrorRate: sampled[m].formatErrorRate,
        }))
      : []),
  ];

  // The same teacher episodes on the train split, once as a MAS and once distilled into one CoA
  // context: the protocol's token saving with the model's quality held equal. The train-split
  // teacher ran before the student's vocabulary existed, so both sides are counted in bytes.
  const distilled = await readRecords(at("data"), ARTIFACTS.distilled);
  const kept = new Set(distilled.map((t) => t.taskId));
  const teachTraces = await readRecords(at("teach"), ARTIFACTS.masTraces);
  const byteCount = (s: string) => bytes.encode(s).length;
  const masSame = costSummary(
    teachTraces.filter((t) => kept.has(t.taskId)).map((t) => masTraceCost(t, byteCount)),
  );
  const coaSame = costSummary(
    distilled.map((t) => trajectoryCostIn(t, true, (ids) => tokenizer.decode(ids), byteCount)),
  );
  const sameRows: SystemRow[] = [
    { name: "Teacher MAS, its kept episodes", success: 1, cost: masSame, formatErrorRate: null },
    { name: "Same episodes as one CoA context", success: 1, cost: coaSame, formatErrorRate: 0 },
  ];

  const findings: string[] = [];
  // Beating means a paired interval above 0, not a higher point estimate that noise could give.
  const rlBeats = gain ? gain.low !== null && gain.low > 0 : rl.success.pass1 > sft.success.pass1;
  findings.push(
    (rlBeats
      ? `AFM-RL beats AFM-SFT on test success (${pct(rl.success.pass1)} vs ${pct(sft.success.pass1)}).`
      : `AFM-RL does **not** beat AFM-SFT on test success here (${pct(rl.success.pass1)} vs ${pct(sft.success.pass1)}).${await rlSignal(at("rl"))}`) +
      fewSolved(rlEpisodes, "AFM-RL"),
  );
  findings.push(
    sampled
      ? pairedGain(rlPairedGain(sampled.sft, sampled.rl), sampled.sft.success.k, rlTemperature)
      : pairedGain(gain, sft.success.k, null),
  );
  const best = [rl, sft].find((s) => s.cost.billedTokensPerSolvedTask !== null);
  if (best) {
    const name = best === rl ? "AFM-RL" : "AFM-SFT";
    findings.push(costFinding(name, best.cost, "the teacher MAS", teacher.cost));
    if (team) findings.push(costFinding(name, best.cost, `the same team on @openai/agents`, team.cost));
  } else {
    findings.push(
      "Tokens per solved task cannot be compared on the test split: the CoA model solved no test task, and the tokens it spent failing say nothing about efficiency.",
    );
  }

  const funnel = await readArtifact(at("data"), ARTIFACTS.funnel).catch(() => null);
  const report: Report = {
    title: `coa demo (${preset.name})`,
    sections: [
      {
        title: "Results on the test split",
        blocks: [
          {
            kind: "text",
            text: `${preset.evalTasks} test tasks of a generated world the student never saw (seed ${preset.seed}, size ${preset.worldSize}; the teacher's SFT data and RL came from worlds ${preset.trainSeeds}; ${baseWords(preset)}), k=${preset.evalK}, temperature ${preset.evalTemperature}${preset.evalTemperature === 0 ? " (greedy)" : ""}. Tokens are counted with the student model's tokenizer (\`${tokenizer.name}\`) for every system; "tokens / task" is what an API would bill: each model call's whole input context plus its output; "with a prefix cache" counts each token once per context it is first computed in (what a serving engine like vLLM actually computes). The teacher is the **expert driver**, a deterministic programmatic stand-in for a strong LLM that uses the same real tools.${team ? " The same team rebuilt on a real agent framework (`coa team`: @openai/agents agents, handoffs and function tools, played by the expert driver) is billed for what the framework sends at each model call: instructions, tool schemas, history and handoff context (docs/import.md)." : ""}`,
          },
          resultsTable(rows),
          { kind: "text", text: findings.join("\n\n") },
        ],
      },
      {
        title: "Success per task kind",
        blocks: [
          kindsTable(
            [
              { name: "Teacher MAS", byKind: teacher.byKind },
              ...(team ? [{ name: "Framework team", byKind: team.byKind }] : []),
              { name: "AFM-SFT", byKind: sft.byKind },
              { name: "AFM-RL", byKind: rl.byKind },
            ],
            sft.success.k,
          ),
          ...(sft.byKind && rl.byKind
            ? []
            : [{ kind: "text" as const, text: `Per-kind success of a model ${RERUN}.` }]),
        ],
      },
      {
        title: "Copy accuracy",
        blocks: [
          {
            kind: "text",
            text: "Whether the model copies names it never saw in training into its tool calls, verbatim: the entity the question names into its first tool call, and, on tasks whose second lookup is about what the first one found (e.g. the birthplace of a person, then that city's country), the found name into its second tool call. An episode without that call counts as a miss.",
          },
          {
            kind: "table",
            header: [
              "system",
              "question's entity → first tool call",
              "first lookup's value → second tool call",
            ],
            rows: [
              [`AFM-SFT (${sft.model})`, copyCell(sft.copy?.entity), copyCell(sft.copy?.value)],
              [`AFM-RL (${rl.model})`, copyCell(rl.copy?.entity), copyCell(rl.copy?.value)],
            ],
          },
        ],
      },
      {
        title: "Same work, one context: MAS vs CoA at equal quality",
        blocks: [
          {
            kind: "text",
            text: `The ${coaSame.episodes} train-split teacher episodes that survived distillation, costed twice in bytes: as the multi-agent system ran them (every agent call re-reads its own context) and as the distilled single-model trajectory (one growing context, each turn re-reads it). Quality is equal by construction, so this isolates what the Chain-of-Agents protocol saves: ${pct(reduction(coaSame.billedTokensPerSolvedTask ?? 0, masSame.billedTokensPerSolvedTask ?? 0))} fewer tokens per solved task as billed (target ≥ 80%; the paper reports 84.6% for trained models), ${pct(reduction(coaSame.processedTokensPerSolvedTask ?? 0, masSame.processedTokensPerSolvedTask ?? 0))} fewer with a prefix cache on both sides.`,
          },
          resultsTable(sameRows),
        ],
      },
      {
        title: "Stages",
        blocks: [
          {
            kind: "table",
            header: ["stage", "what", "seconds"],
            rows: timings.map((t) => [t.name, t.title, t.seconds.toFixed(1)]),
          },
          {
            kind: "text",
            text: `Total ${timings.reduce((a, t) => a + t.seconds, 0).toFixed(0)} s. Reproduce with \`npx coa demo${preset.name === "default" ? "" : ` --${preset.name}`}\`.`,
          },
        ],
      },
      {
        title: "Distillation funnel",
        blocks: funnel
          ? [
              {
                kind: "table",
                header: ["stage", "in", "out", "dropped"],
                rows: funnel.stages.map((s) => [
                  s.stage,
                  s.in,
                  s.out,
                  Object.entries(s.dropped)
                    .map(([k, v]) => `${k} ${v}`)
                    .join(", ") || "–",
                ]),
              },
              ...(await figure(at("data", "plots", "lengths.svg"), "trajectory lengths (tokens)", out)),
              ...(await figure(at("data", "plots", "tool-calls.svg"), "tool calls per trajectory", out)),
            ]
          : [{ kind: "text", text: `(no ${ARTIFACTS.funnel.file})` }],
      },
      {
        title: "Training curves",
        blocks: [
          ...(preset.base === "pretrain"
            ? await figure(
                at("base", "loss.svg"),
                "pretraining loss (train, held-out world, copied names only)",
                out,
              )
            : []),
          ...(await figure(at("sft", "loss.svg"), "SFT loss (train and held-out)", out)),
          ...(await figure(
            at("sft", "dev.svg"),
            "SFT learning curve: greedy success and copy accuracy on dev tasks of a training world",
            out,
          )),
          ...(await figure(at("rl", "reward.svg"), "RL reward and success per step", out)),
          ...(await figure(at("rl", "length.svg"), "RL response length", out)),
        ],
      },
      {
        title: "Example trajectories (AFM-RL, test split)",
        blocks: examples(rlEpisodes, tokenizer),
      },
    ],
  };
  const markdown = reportMarkdown(report);
  const html = reportHtml(report);
  await writeFile(at("report.md"), markdown);
  await writeFile(at("report.html"), html);
  return { markdown, html, report };
}
