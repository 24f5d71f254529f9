import { z } from "zod";
import { Rng } from "../../tasks/index.js";
import { DOC_KINDS, DocKind, type PretrainDoc } from "./drills.js";

/**
 * How much of each kind of text goes into pretraining: a weight per kind, 1 = every document once,
 * 2 = twice, 0.25 = a seeded quarter of them; a kind left out is not used.
 */
export const Mix = z
  .partialRecord(DocKind, z.number().min(0))
  .refine((m) => Object.values(m).some((w) => w > 0), { message: "the mix must give some kind a weight" });
export type Mix = z.infer<typeof Mix>;

/** `drills` names every drill kind at once. */
const GROUPS: Record<string, readonly DocKind[]> = { drills: ["lookup", "chain", "facts"] };

/** "articles,drills" or "articles:2,chain:0.5,lookup" → weights per kind (a bare name weighs 1). */
export function parseMix(spec: string): Mix {
  const mix: Mix = {};
  for (const item of spec.split(",").map((s) => s.trim())) {
    const m = /^([a-z]+)(?::(\d+(?:\.\d+)?))?$/.exec(item);
    const kinds = m ? (GROUPS[m[1]] ?? (DocKind.safeParse(m[1]).success ? [m[1] as DocKind] : null)) : null;
    if (!m || !kinds)
      throw new Error(
        `mix "${spec}": "${item}" is not a kind (${[...DOC_KINDS, ...Object.keys(GROUPS)].join(", ")}) with an optional :weight`,
      );
    for (const k of kinds) mix[k] = m[2] === undefined ? 1 : Number(m[2]);
  }
  return Mix.parse(mix);
}

/**
 * The documents the mix asks for: each document of a kind weighted w appears floor(w) times, and
 * once more with probability w − floor(w), drawn from `seed` and its index (the same every run).
 */
export function applyMix(
  byKind: Partial<Record<DocKind, readonly PretrainDoc[]>>,
  mix: Mix,
  seed: number,
): PretrainDoc[] {
  const out: PretrainDoc[] = [];
  for (const kind of DOC_KINDS) {
    const weight = mix[kind] ?? 0;
    const rng = new Rng(`${seed}:mix:${kind}`);
    for (const doc of byKind[kind] ?? []) {
      const times = Math.floor(weight) + (rng.float() < weight - Math.floor(weight) ? 1 : 0);
      for (let i = 0; i < times; i++) out.push(doc);
    }
  }
  return out;
}
