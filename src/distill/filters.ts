import path from "node:path";
import type { Tokenizer } from "../model/index.js";
import {
  checkTrajectory,
  completionIds,
  PROFILES,
  type ProfileName,
  REPLAN_SCORE,
  type Step,
  type Trajectory,
} from "../protocol/index.js";
import type { MasTrace } from "../teacher/index.js";
import { buildTrajectory } from "./build.js";
import type { DistillConfig } from "./config.js";
import { convertTrace, type Piece } from "./convert.js";
import { findNearDuplicates } from "./dedup.js";
import { filterStage, type Outcome, type Stage, type Tracked } from "./funnel.js";
import type { TraceRef } from "./read.js";

/** A trace read from disk. */
export interface TraceItem extends Tracked {
  ref: TraceRef;
  taskId: string;
  trace: MasTrace;
}

/** A trace converted into a token-exact trajectory. */
export interface Candidate extends TraceItem {
  pieces: Piece[];
  steps: Step[];
  trajectory: Trajectory;
}

const drop = (reason: string, detail: string) => ({ reason, detail });

/** Correct answers only; an episode that broke is an error, not a wrong answer. */
export function correctnessStage(cfg: DistillConfig["correctness"]): Stage<TraceItem, TraceItem> {
  return filterStage("correctness", ({ trace }) => {
    if (trace.error) return drop("teacher_error", trace.error);
    if (trace.reward === null) return drop("unscored", "the trace has no reward");
    if (trace.reward < cfg.minReward)
      return drop("wrong_answer", `reward ${trace.reward} < ${cfg.minReward}`);
    return null;
  });
}

/** Converts through the mapping table and keeps what renders into a valid CoA trajectory. */
export function formatStage(opts: {
  profile: ProfileName;
  tokenizer: Tokenizer;
}): Stage<TraceItem, Candidate> {
  return {
    name: "format",
    run: (items) =>
      items.map((item) => {
        // One bad trace (or a tokenizer choking on its text) costs that trace, never the run.
        try {
          return toCandidate(item, opts);
        } catch (err) {
          return {
            ok: false,
            reason: "conversion_error",
            detail: err instanceof Error ? err.message : String(err),
          };
        }
      }),
  };
}

function toCandidate(
  item: TraceItem,
  opts: { profile: ProfileName; tokenizer: Tokenizer },
): Outcome<Candidate> {
  const converted = convertTrace(item.trace, opts.profile);
  if (!converted.ok) return { ok: false, reason: converted.reason, detail: converted.detail };
  const { trace, ref } = item;
  const trajectory = buildTrajectory(trace, converted.pieces, {
    tokenizer: opts.tokenizer,
    profile: opts.profile,
    id: `${trace.taskId}@${path.basename(ref.file)}:${ref.line}`,
    distill: {
      source: trace.source,
      taskKind: trace.taskKind,
      answers: trace.answers,
      driver: trace.driver,
      teacher: trace.stats,
      trace: `${ref.file}:${ref.line}`,
    },
  });
  // The protocol's own record check, on the text decoded from the ids: format, rules, loss mask, prompt.
  const problem = checkTrajectory(trajectory, (ids) => opts.tokenizer.decode(ids)).problems[0];
  if (problem)
    return {
      ok: false,
      reason: problem.kind ?? "bad_record",
      detail: `${problem.field}: ${problem.message}`,
    };
  const steps = converted.pieces.map((p) => p.step);
  return { ok: true, value: { ...item, pieces: converted.pieces, steps, trajectory } };
}

const toolCallCount = (c: Candidate): number =>
  Object.values(c.trajectory.stats.toolCalls).reduce((a, b) => a + b, 0);

export function budgetStage(cfg: DistillConfig["budget"]): Stage<Candidate, Candidate> {
  return filterStage("budget", (c) => {
    const calls = toolCallCount(c);
    if (calls > cfg.maxToolCalls)
      return drop("over_tool_budget", `${calls} tool calls > ${cfg.maxToolCalls}`);
    if (calls < cfg.minToolCalls)
      return drop("under_tool_budget", `${calls} tool calls < ${cfg.minToolCalls}`);
    const dup = c.trajectory.stats.duplicateCalls;
    if (dup > 0 && !cfg.allowRedundantCalls)
      return drop("redundant_call", `${dup} call(s) repeat an earlier tool call with the same arguments`);
    return null;
  });
}

export const totalTokens = (t: Trajectory): number => t.promptIds.length + completionIds(t).length;

export function lengthStage(cfg: DistillConfig["length"]): Stage<Candidate, Candidate> {
  return filterStage("length", (c) => {
    const n = totalTokens(c.trajectory);
    return n > cfg.maxTokens ? drop("too_long", `${n} tokens > ${cfg.maxTokens}`) : null;
  });
}

/** Positions of setbacks the teacher had to recover from: failed tool calls and failed double checks. */
function setbacks(pieces: readonly Piece[]): { at: number; what: string }[] {
  return pieces.flatMap((p, at) => {
    if (p.step.type === "observation" && p.ok === false) return [{ at, what: "a failed tool call" }];
    if (p.step.type === "double_check" && p.step.score !== null && p.step.score <= REPLAN_SCORE)
      return [{ at, what: `a double check scoring ${p.step.score}` }];
    return [];
  });
}

export function qualityStage(
  cfg: DistillConfig["quality"],
  profile: ProfileName,
): Stage<Candidate, Candidate> {
  const roles: readonly string[] = PROFILES[profile].roles;
  return filterStage("quality", ({ pieces, steps }) => {
    if (cfg.requirePlan && !steps.some((s) => s.type === "plan")) return drop("no_plan", "no <plan> step");
    if (cfg.requireReflectionAfterError && roles.includes("reflection")) {
      for (const { at, what } of setbacks(pieces)) {
        if (!steps.slice(at + 1).some((s) => s.type === "reflection"))
          return drop(
            "no_recovery_reflection",
            `step ${at + 1}: ${what} is never followed by a <reflection>`,
          );
      }
    }
    if (cfg.requireDoubleCheck && roles.includes("double_check")) {
      const check = steps.findLast((s) => s.type === "double_check");
      if (check?.type !== "double_check")
        return drop("no_double_check", "no <double_check> before the answer");
      if (check.score !== null && check.score <= REPLAN_SCORE)
        return drop("failed_double_check", `the last double check scores ${check.score}`);
    }
    return null;
  });
}

export function dedupStage(cfg: DistillConfig["dedup"]): Stage<Candidate, Candidate> {
  return {
    name: "dedup",
    run: (items) => {
      const dups = cfg.enabled
        ? findNearDuplicates(
            items.map((c) => c.trace.question),
            cfg,
          )
        : [];
      return items.map((c, i) => {
        const dup = dups[i];
        if (!dup) return { ok: true, value: c };
        const original = items[dup.of]!;
        const detail = `question ${Math.round(dup.similarity * 100)}% similar to task ${original.taskId} (${original.ref.file}:${original.ref.line})`;
        return { ok: false, reason: "near_duplicate", detail };
      });
    },
  };
}

/** Keeps every hard trajectory and caps the share of easy ones (few tool calls), evenly spread. */
export function balanceStage(cfg: DistillConfig["balance"]): Stage<Candidate, Candidate> {
  return {
    name: "balance",
    run: (items) => {
      const easy = items.flatMap((c, i) =>
        cfg.enabled && toolCallCount(c) < cfg.easyBelowToolCalls ? [i] : [],
      );
      const hard = items.length - easy.length;
      const share = cfg.maxEasyShare;
      const allowed =
        share >= 1 ? easy.length : Math.min(easy.length, Math.floor((share * hard) / (1 - share)));
      const keep = new Set<number>();
      for (let k = 0; k < allowed; k++) keep.add(easy[Math.floor((k * easy.length) / allowed)]!);
      const easySet = new Set(easy);
      return items.map((c, i) =>
        easySet.has(i) && !keep.has(i)
          ? {
              ok: false,
              reason: "easy_over_share",
              detail: `${toolCallCount(c)} tool calls; easy traces capped at ${share * 100}% of the kept set`,
            }
          : { ok: true, value: c },
      );
    },
  };
}
