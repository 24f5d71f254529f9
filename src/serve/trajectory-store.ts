import { Trajectory } from "../protocol/index.js";
import { appendJsonl, jsonlLines, repairJsonlTail } from "../util/index.js";

/** How many recent trajectories are answered from memory; older ones are read back from the log. */
const KEPT_IN_MEMORY = 1_000;

/**
 * Every served episode's token-exact trajectory, by response id (`meta.responseId`): appended to a
 * JSONL log and kept in memory for the most recent ones.
 *
 * Appends are chained one after another, each one whole line in one write, so concurrent episodes
 * never interleave and a kill tears at most the last line (cut at the next start).
 */
export class TrajectoryStore {
  private readonly recent = new Map<string, Trajectory>();
  private tail: Promise<void> = Promise.resolve();

  private constructor(readonly file: string) {}

  static async open(file: string): Promise<TrajectoryStore> {
    await repairJsonlTail(file);
    return new TrajectoryStore(file);
  }

  /** Logs the trajectory under the response id; resolves once its line is written. */
  async add(responseId: string, trajectory: Trajectory): Promise<Trajectory> {
    const record = Trajectory.parse({ ...trajectory, meta: { ...trajectory.meta, responseId } });
    const written = this.tail.then(() => appendJsonl(this.file, record));
    // A failed write fails its own request, not the ones queued behind it.
    this.tail = written.catch(() => {});
    await written;
    this.recent.set(responseId, record);
    if (this.recent.size > KEPT_IN_MEMORY) this.recent.delete(this.recent.keys().next().value!);
    return record;
  }

  async get(responseId: string): Promise<Trajectory | undefined> {
    const kept = this.recent.get(responseId);
    if (kept) return kept;
    await this.tail;
    try {
      for await (const { text } of jsonlLines(this.file)) {
        // Cheap filter first: most lines are other episodes.
        if (!text.includes(responseId)) continue;
        const parsed = Trajectory.safeParse(parseOrNull(text));
        if (parsed.success && parsed.data.meta.responseId === responseId) return parsed.data;
      }
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== "ENOENT") throw err;
    }
    return undefined;
  }
}

/** A torn line (a kill mid-write) is no record, not an error. */
function parseOrNull(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return null;
  }
}
