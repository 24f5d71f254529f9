import { z } from "zod";
import { Plan, type Task } from "../tasks/index.js";

/**
 * What a world task asks the model to copy (null where it asks nothing of the kind): `entity`, the
 * name the question gives, into its first tool call; `value`, the name the first lookup returns,
 * into its second, when the second lookup is about that value.
 */
export interface CopyTargets {
  entity: string | null;
  value: string | null;
}

/** The fields of a world task's meta read here (src/tasks/world: plan.ts, questions.ts). */
const WorldMeta = z.object({ plan: Plan, supportingDocs: z.array(z.string()).default([]) });

/** "wiki/Varen_Holt" → "Varen Holt": the inverse of `articleId` (world names carry no punctuation). */
const articleTitle = (id: string) => id.slice("wiki/".length).replaceAll("_", " ");

export function copyTargets(task: Pick<Task, "meta">): CopyTargets {
  const meta = WorldMeta.safeParse(task.meta);
  if (!meta.success) return { entity: null, value: null };
  const [first, second] = meta.data.plan.steps;
  const entity = first?.op === "lookup" && typeof first.subject === "string" ? first.subject : null;
  const chained = second?.op === "lookup" && typeof second.subject === "object" && second.subject.ref === 0;
  // A chain's supporting documents are its entities' articles in order, so the second is the
  // article of the entity the first lookup finds.
  const doc = meta.data.supportingDocs[1];
  const value = chained && doc?.startsWith("wiki/") ? articleTitle(doc) : null;
  return { entity, value };
}

export const CopyRate = z.object({
  /** Episodes whose task asks for this copy. */
  episodes: z.number(),
  /** Those whose tool call holds the name verbatim. */
  copied: z.number(),
  /** copied / episodes; null when no episode asks for it (no world tasks). */
  rate: z.number().nullable(),
});
export type CopyRate = z.infer<typeof CopyRate>;

export const CopyAccuracy = z.object({
  /** The question's entity in the first tool call. */
  entity: CopyRate,
  /** The value the first lookup returned in the second tool call. */
  value: CopyRate,
});
export type CopyAccuracy = z.infer<typeof CopyAccuracy>;

/** One episode as copy accuracy sees it: its task's targets and its tool calls' arguments in order. */
export interface CopyEpisode {
  targets: CopyTargets;
  toolArgs: readonly string[];
}

/**
 * Whether the model copies names it has never seen into its tool calls, verbatim (case and
 * spelling exact: a near miss finds the wrong article). An episode without the call counts as a miss.
 */
export function copyAccuracy(episodes: readonly CopyEpisode[]): CopyAccuracy {
  const rate = (call: number, target: (t: CopyTargets) => string | null): CopyRate => {
    const asked = episodes.flatMap((e) => {
      const name = target(e.targets);
      return name === null ? [] : [e.toolArgs[call]?.includes(name) ?? false];
    });
    const copied = asked.filter(Boolean).length;
    return { episodes: asked.length, copied, rate: asked.length ? copied / asked.length : null };
  };
  return { entity: rate(0, (t) => t.entity), value: rate(1, (t) => t.value) };
}
