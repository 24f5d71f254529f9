import { z } from "zod";
import { WorldSize } from "../../tasks/index.js";
import { DOC_KINDS } from "./drills.js";
import { Mix } from "./mix.js";

const Seed = z.number().int();

export const PretrainConfig = z
  .object({
    /** The run folder. */
    out: z.string(),
    /** Worlds whose text is pretrained on. */
    seeds: z.array(Seed).min(1),
    /** Seeds never to read, such as the test world's: dropped from `seeds`, refused as `evalSeed`. */
    excludeSeeds: z.array(Seed).default([]),
    /** The held-out world of the eval losses (default: the last of `seeds`, then not trained on). */
    evalSeed: Seed.optional(),
    size: WorldSize.default("small"),
    /** The worlds' question difficulty (as `coa world generate --max-hops`); drills follow their plans. */
    maxHops: z.number().int().min(2).max(4).default(4),
    mix: Mix.default(Object.fromEntries(DOC_KINDS.map((k) => [k, 1]))),
    /** `bpe:N` learns an N-token byte-level BPE from the training worlds' text; else a tokenizer file. */
    tokenizer: z
      .string()
      .refine((t) => !t.startsWith("bpe:") || /^bpe:\d+$/.test(t), "write bpe:<vocabulary size>")
      .default("bpe:2048"),
    steps: z.number().int().positive().default(1000),
    lr: z.number().positive().default(1e-3),
    minLrRatio: z.number().min(0).max(1).default(0.1),
    warmupRatio: z.number().min(0).max(1).default(0.03),
    /** Tokens per step: floor(batchTokens / maxLength) packed sequences of maxLength tokens. */
    batchTokens: z.number().int().positive().default(4096),
    /** The length of every packed sequence (within the model's context). */
    maxLength: z.number().int().min(8).default(1024),
    /** Held-out losses every this many steps, and at the end. 0 turns eval off. */
    evalEvery: z.number().int().nonnegative().default(50),
    /** Held-out text for `eval_loss`, in tokens (whole sequences). */
    evalTokens: z.number().int().positive().default(16384),
    /** Held-out lookup and chain drills whose copied names give `eval_copy_loss`. */
    copyExamples: z.number().int().nonnegative().default(64),
    checkpointEvery: z.number().int().positive().default(100),
    keepCheckpoints: z.number().int().positive().default(2),
    /** Data order, mix draws and held-out choice. */
    seed: z.number().int().default(0),
  })
  .refine((c) => c.maxLength <= c.batchTokens, {
    message: "maxLength must not exceed batchTokens (a step holds at least one sequence)",
    path: ["maxLength"],
  })
  .transform((c, ctx) => {
    const excluded = new Set(c.excludeSeeds);
    const allowed = c.seeds.filter((s) => !excluded.has(s));
    const evalSeed = c.evalSeed ?? allowed.at(-1);
    const train = allowed.filter((s) => s !== evalSeed);
    const fail = (path: string, message: string) => {
      ctx.issues.push({ code: "custom", path: [path], message, input: c });
      return z.NEVER;
    };
    if (evalSeed === undefined || excluded.has(evalSeed))
      return fail("evalSeed", "the held-out world must be a seed that is not excluded (a test world)");
    if (!train.length)
      return fail("seeds", "no world is left to train on once excluded and held-out seeds are taken out");
    /** The seeds actually used, recorded in config.json. */
    return { ...c, worlds: { train, eval: evalSeed } };
  });
export type PretrainConfig = z.infer<typeof PretrainConfig>;
export type PretrainConfigInput = z.input<typeof PretrainConfig>;
