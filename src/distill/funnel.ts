import { z } from "zod";
import { refText, type TraceRef } from "./read.js";

/** Why one trace left the funnel. */
export interface Drop {
  stage: string;
  reason: string;
  detail: string;
  /** `file:line` of the trace. */
  at: string;
  taskId?: string;
}

/** One stage's counts: how many came in, how many went on, and the drops by reason. */
export const StageCount = z.object({
  stage: z.string(),
  in: z.number(),
  out: z.number(),
  dropped: z.record(z.string(), z.number()),
});
export type StageCount = z.infer<typeof StageCount>;

/** The file distill writes its funnel to: each stage's counts (beside the config it ran with). */
export const FUNNEL_FILE = "funnel.json";
export const FunnelFile = z.object({ stages: z.array(StageCount) });
export type FunnelFile = z.infer<typeof FunnelFile>;

export type Outcome<O> = { ok: true; value: O } | { ok: false; reason: string; detail: string };

export interface Tracked {
  ref: TraceRef;
  taskId?: string;
}

/** A funnel stage: decides for a whole batch at once (dedup and balancing need to see every item). */
export interface Stage<I extends Tracked, O extends Tracked> {
  name: string;
  run(items: readonly I[]): Outcome<O>[];
}

/** A stage that keeps or drops each item on its own. */
export function filterStage<T extends Tracked>(
  name: string,
  check: (item: T) => { reason: string; detail: string } | null,
): Stage<T, T> {
  return {
    name,
    run: (items) =>
      items.map((item) => {
        const drop = check(item);
        return drop ? { ok: false, ...drop } : { ok: true, value: item };
      }),
  };
}

/** Runs stages in order and records each stage's counts and every drop. */
export class Funnel {
  readonly stages: StageCount[] = [];
  readonly drops: Drop[] = [];

  /** Records a stage whose outcomes were decided elsewhere (reading, for instance). */
  record<O extends Tracked>(
    name: string,
    outcomes: readonly (Outcome<O> & { ref: TraceRef; taskId?: string })[],
  ): O[] {
    return this.tally(name, outcomes, (i) => outcomes[i]!);
  }

  apply<I extends Tracked, O extends Tracked>(stage: Stage<I, O>, items: readonly I[]): O[] {
    return this.tally(stage.name, stage.run(items), (i) => items[i]!);
  }

  private tally<O>(name: string, outcomes: readonly Outcome<O>[], source: (i: number) => Tracked): O[] {
    const count: StageCount = { stage: name, in: outcomes.length, out: 0, dropped: {} };
    const kept: O[] = [];
    outcomes.forEach((o, i) => {
      if (o.ok) {
        kept.push(o.value);
        return;
      }
      const { ref, taskId } = source(i);
      count.dropped[o.reason] = (count.dropped[o.reason] ?? 0) + 1;
      this.drops.push({
        stage: name,
        reason: o.reason,
        detail: o.detail,
        at: refText(ref),
        ...(taskId ? { taskId } : {}),
      });
    });
    count.out = kept.length;
    this.stages.push(count);
    return kept;
  }
}
