import type { Task } from "../task.js";
import { SPLITS, type Split } from "./generate.js";

export interface SplitStats {
  tasks: number;
  kinds: Record<string, number>;
  hops: Record<string, number>;
  difficulty: Record<string, number>;
}

const bump = (counts: Record<string, number>, key: string) => {
  counts[key] = (counts[key] ?? 0) + 1;
};

export function splitStats(tasks: readonly Task[]): SplitStats {
  const stats: SplitStats = { tasks: tasks.length, kinds: {}, hops: {}, difficulty: {} };
  for (const t of tasks) {
    bump(stats.kinds, t.kind);
    bump(stats.hops, String(t.meta.hops ?? "?"));
    bump(stats.difficulty, String(t.meta.difficulty ?? "?"));
  }
  return stats;
}

/** A plain-text table: one row per split, one column per kind, hop count and difficulty. */
export function formatStats(stats: Partial<Record<Split, SplitStats>>): string {
  const present = SPLITS.filter((s) => stats[s]);
  const rank = (k: string) => ["easy", "medium", "hard"].indexOf(k);
  const columns = (pick: (s: SplitStats) => Record<string, number>) =>
    [...new Set(present.flatMap((s) => Object.keys(pick(stats[s]!))))].sort(
      (a, b) => rank(a) - rank(b) || a.localeCompare(b, "en", { numeric: true }),
    );
  const section = (title: string, pick: (s: SplitStats) => Record<string, number>) => {
    const keys = columns(pick);
    const rows = [["split", ...keys, "total"]];
    for (const s of present) {
      const counts = pick(stats[s]!);
      rows.push([s, ...keys.map((k) => String(counts[k] ?? 0)), String(stats[s]!.tasks)]);
    }
    const widths = rows[0].map((_, i) => Math.max(...rows.map((r) => r[i].length)));
    const lines = rows.map((r) =>
      r.map((cell, i) => (i === 0 ? cell.padEnd(widths[i]) : cell.padStart(widths[i]))).join("  "),
    );
    return [`${title}:`, ...lines.map((l) => `  ${l}`)].join("\n");
  };
  return [
    section("kinds", (s) => s.kinds),
    section("hops", (s) => s.hops),
    section("difficulty", (s) => s.difficulty),
  ].join("\n\n");
}
