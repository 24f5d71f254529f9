import { z } from "zod";
import { trajectorySchema } from "../protocol/index.js";
import { type RunTrajectory, RuntimeMeta } from "../runtime/index.js";
import { appendJsonl, jsonlLines, repairJsonlTail } from "../util/index.js";

/** What `coa serve` records about an episode, in `Trajectory.meta.serve`. */
export const ServeMeta = z.object({
  /** The chat completion's id, under which GET /v1/trajectories/:id answers with the record. */
  responseId: z.string(),
});
export type ServeMeta = z.infer<typeof ServeMeta>;

/** A served episode's record: the runtime's meta and the response id, typed. Reads v1 logs too. */
export const ServedTrajectory = trajectorySchema({ runtime: RuntimeMeta, serve: ServeMeta });
export type ServedTrajectory = z.infer<typeof ServedTrajectory>;

/** How many recent trajectories are answered from memory; older ones are read back from the log. */
const KEPT_IN_MEMORY = 1_000;

/**
 * Every served episode's token-exact trajectory, by response id (`meta.serve.responseId`): appended to a
 * JSONL log and kept in memory for the most recent ones.
 *
 * Appends are chained one after another, each one whole line in one write, so concurrent episodes
 * never interleave and a kill tears at most the last line (cut at the next start).
 */
export class TrajectoryStore {
  private readonly recent = new Map<string, ServedTrajectory>();
  private tail: Promise<void> = Promise.resolve();

  private constructor(readonly file: string) {}

  static async open(file: string): Promise<TrajectoryStore> {
    await repairJsonlTail(file);
    return new TrajectoryStore(file);
  }

  /** Logs the trajectory under the response id; resolves once its line is written. */
  async add(responseId: string, trajectory: RunTrajectory): Promise<ServedTrajectory> {
    const record = ServedTrajectory.parse({
      ...trajectory,
      meta: { ...trajectory.meta, serve: { responseId } },
    });
    const written = this.tail.then(() => appendJsonl(this.file, record));
    // A failed write fails its own request, not the ones queued behind it.
    this.tail = written.catch(() => {});
    await written;
    this.recent.set(responseId, record);
    if (this.recent.size > KEPT_IN_MEMORY) this.recent.delete(this.recent.keys().next().value!);
    return record;
  }

  async get(responseId: string): Promise<ServedTrajectory | undefined> {
    const kept = this.recent.get(responseId);
    if (kept) return kept;
    await this.tail;
    try {
      for await (const { text } of jsonlLines(this.file)) {
        // Cheap filter first: most lines are other episodes.
        if (!text.includes(responseId)) continue;
        const parsed = ServedTrajectory.safeParse(parseOrNull(text));
        if (parsed.success && parsed.data.meta.serve.responseId === responseId) return parsed.data;
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
