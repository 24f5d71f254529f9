import { readdir, readFile, writeFile } from "node:fs/promises";
import path from "node:path";
import { type TrainBpeOptions, tokenizerFromSpec } from "./bpe-tokenizer.js";
import { BYTE_TOKENIZER_NAME, ByteTokenizer, type Tokenizer, TokenizerSpec } from "./byte-tokenizer.js";
import { Engine } from "./engine.js";
import type { ModelClient } from "./types.js";

/**
 * Trajectory ids are decoded offline with the tokenizer they name. Whatever writes trajectories in a
 * vocabulary other than bytes (distill, eval, run) writes it beside them in a file whose name
 * contains "tokenizer" and ends in .json; viewers and reports find it there.
 */
export const TOKENIZER_FILE = "tokenizer.json";

/** Reads a tokenizer file, such as the `tokenizer.json` that `coa distill` writes next to its data. */
export async function readTokenizerFile(file: string): Promise<Tokenizer> {
  let json: unknown;
  try {
    json = JSON.parse(await readFile(file, "utf8"));
  } catch (err) {
    throw new Error(`${file}: cannot read a tokenizer (${(err as Error).message})`);
  }
  const parsed = TokenizerSpec.safeParse(json);
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    throw new Error(`${file}: field ${issue.path.join(".") || "(root)"}: ${issue.message}`);
  }
  return tokenizerFromSpec(parsed.data, file);
}

/**
 * A `--tokenizer` value: a tokenizer file, or `bpe:<vocabulary size>`, which asks the caller to learn
 * a BPE of that size from its own text (`trainBpe`).
 */
export async function tokenizerFlag(flag: string): Promise<Tokenizer | { train: TrainBpeOptions }> {
  const bpe = /^bpe:(\d+)$/.exec(flag);
  if (!bpe) return readTokenizerFile(flag);
  const vocabSize = Number(bpe[1]);
  const least = new ByteTokenizer().vocabSize + 1;
  if (vocabSize < least)
    throw new Error(`--tokenizer ${flag}: the vocabulary needs at least ${least} tokens`);
  return { train: { vocabSize } };
}

/** The tokenizer files in the folders of `files` (and in folders given directly), by name; bytes always. */
export async function findTokenizers(files: readonly string[]): Promise<Map<string, Tokenizer>> {
  const byte = new ByteTokenizer();
  const found = new Map<string, Tokenizer>([[byte.name, byte]]);
  const dirs = new Set(files.map((f) => (f.endsWith(".jsonl") ? path.dirname(f) : f)));
  for (const dir of dirs) {
    const names = await readdir(dir).catch(() => [] as string[]);
    for (const name of names.filter((n) => n.includes("tokenizer") && n.endsWith(".json"))) {
      // A file that is not a tokenizer (or a broken one) only means its ids stay undecoded.
      const tok = await readTokenizerFile(path.join(dir, name)).catch(() => null);
      if (tok) found.set(tok.name, tok);
    }
  }
  return found;
}

/**
 * Writes the vocabulary of an embedded-engine model (when it is not bytes) to `file`, so that the
 * trajectories written beside it can be decoded offline. Other models' ids name their own tokenizer.
 */
export async function saveTokenizerOf(model: ModelClient, file: string): Promise<void> {
  const tok = model instanceof Engine ? model.localTokenizer : null;
  if (tok && tok.name !== BYTE_TOKENIZER_NAME) await writeFile(file, `${JSON.stringify(tok)}\n`);
}
