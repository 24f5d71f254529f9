import { stat } from "node:fs/promises";
import path from "node:path";
import { loadTasks, WORLD_CORPUS_FILE } from "../tasks/index.js";

/**
 * The corpus that goes with a task path: `<world>/corpus.jsonl` for a world folder, or for a task
 * file inside a world (`<world>/tasks/test.jsonl`) or beside one.
 */
export async function findCorpus(tasks: string): Promise<string | undefined> {
  const info = await stat(tasks).catch(() => null);
  const candidates = info?.isDirectory()
    ? [path.join(tasks, WORLD_CORPUS_FILE)]
    : [
        path.join(path.dirname(tasks), WORLD_CORPUS_FILE),
        path.join(path.dirname(tasks), "..", WORLD_CORPUS_FILE),
      ];
  for (const c of candidates) if (await stat(c).catch(() => null)) return c;
  return undefined;
}

/** The tasks at a path: a task file as it is, or the given split of a world folder. */
export async function loadTasksOrSplit(tasks: string, split: string) {
  const isDir = (await stat(tasks).catch(() => null))?.isDirectory() ?? false;
  return loadTasks(tasks, isDir ? { split } : {});
}
