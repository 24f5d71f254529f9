import { stat } from "node:fs/promises";
import path from "node:path";
import {
  interleave,
  isWorldSet,
  loadTasks,
  readWorldSet,
  type SkippedRow,
  type Task,
  WORLD_CORPUS_FILE,
} from "../tasks/index.js";

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

/**
 * A corpus a command cannot work without: `corpus` as found or given, or an error naming the flag
 * at fault, raised before any task runs. Only a command with `--corpus` can be told where one is.
 */
export function requireCorpus<C>(
  corpus: C | undefined,
  tasks: string,
  flag: "--corpus" | "--dev-tasks" = "--corpus",
): C {
  if (corpus) return corpus;
  const hint = flag === "--corpus" ? "; name one with --corpus" : "";
  throw new Error(`${flag}: no corpus.jsonl next to ${tasks}${hint}`);
}

/** The tasks at a path: a task file as it is, or the given split of a world folder. */
export async function loadTasksOrSplit(tasks: string, split: string) {
  const isDir = (await stat(tasks).catch(() => null))?.isDirectory() ?? false;
  return loadTasks(tasks, isDir ? { split } : {});
}

/** Tasks and the tools each is solved with (`taskGround`). */
export interface TaskGround<Tools> {
  tasks: Task[];
  tools: Tools | ((task: Task) => Tools);
  /** The corpus searched, one per world of a world set; undefined when none was found. */
  corpus: string | string[] | undefined;
  /** What the tasks were read from, for logs and configs. */
  taskFile: string;
  skipped: SkippedRow[];
}

/**
 * The tasks at a path and the tools they are solved with. A world set gives each task its own world's
 * corpus, and its tasks interleaved by world, so that taking the first N draws evenly from every
 * world; a world folder or a task file is searched in `corpus`, else the corpus found beside it.
 */
export async function taskGround<Tools>(
  source: { tasks: string; split: string; corpus?: string },
  toolsFor: (corpus: string | undefined) => Promise<Tools> | Tools,
): Promise<TaskGround<Tools>> {
  if (await isWorldSet(source.tasks)) {
    if (source.corpus)
      throw new Error("--corpus: a world set searches each world's own corpus; drop --corpus");
    const byTask = new Map<string, Tools>();
    const perWorld: Task[][] = [];
    const corpora: string[] = [];
    const skipped: SkippedRow[] = [];
    for (const world of await readWorldSet(source.tasks)) {
      const corpus = path.join(world.dir, WORLD_CORPUS_FILE);
      const tools = await toolsFor(corpus);
      const loaded = await loadTasks(world.dir, { split: source.split });
      for (const t of loaded.tasks) byTask.set(t.id, tools);
      perWorld.push(loaded.tasks);
      corpora.push(corpus);
      skipped.push(...loaded.skipped);
    }
    return {
      tasks: interleave(perWorld),
      tools: (task: Task) => byTask.get(task.id)!,
      corpus: corpora,
      taskFile: `${source.tasks} (${source.split})`,
      skipped,
    };
  }
  const loaded = await loadTasksOrSplit(source.tasks, source.split);
  const corpus = source.corpus ?? (await findCorpus(source.tasks));
  return {
    tasks: loaded.tasks,
    tools: await toolsFor(corpus),
    corpus,
    taskFile: loaded.file,
    skipped: loaded.skipped,
  };
}
