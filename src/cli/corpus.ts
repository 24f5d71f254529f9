import { stat } from "node:fs/promises";
import path from "node:path";

/**
 * The corpus that goes with a task path: `<world>/corpus.jsonl` for a world folder, or for a task
 * file inside a world (`<world>/tasks/test.jsonl`) or beside one.
 */
export async function findCorpus(tasks: string): Promise<string | undefined> {
  const info = await stat(tasks).catch(() => null);
  const candidates = info?.isDirectory()
    ? [path.join(tasks, "corpus.jsonl")]
    : [path.join(path.dirname(tasks), "corpus.jsonl"), path.join(path.dirname(tasks), "..", "corpus.jsonl")];
  for (const c of candidates) if (await stat(c).catch(() => null)) return c;
  return undefined;
}
