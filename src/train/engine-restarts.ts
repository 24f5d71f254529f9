/** What a restartable run needs of its engine: whether its process crashed, and how to stop it. */
export interface RestartableEngine {
  readonly crashReason: string | null;
  close(): Promise<void>;
}

export interface EngineRestartOptions {
  /** How many times a dead engine is started again (default 2). */
  restarts?: number;
  /** The checkpoint a new engine would resume from, or null when the run has none yet. */
  latestCheckpoint: () => Promise<string | null>;
  onRestart?: (info: { reason: string; checkpoint: string; restart: number; restarts: number }) => void;
}

/**
 * Runs `run` on an engine from `start`; when the engine process dies during the run (a crash in
 * native code, the OOM killer) and the run folder holds a checkpoint, starts a new engine, which
 * resumes from that checkpoint, and runs again. The step loops resume exactly (batches are a pure
 * function of their position), so a long run loses only the steps since its last checkpoint. Any
 * other error, a death before the first checkpoint, or one death too many, is thrown as it came.
 */
export async function withEngineRestarts<E extends RestartableEngine, T>(
  start: () => Promise<E>,
  run: (engine: E) => Promise<T>,
  opts: EngineRestartOptions,
): Promise<T> {
  const restarts = opts.restarts ?? 2;
  for (let restart = 0; ; restart++) {
    const engine = await start();
    try {
      return await run(engine);
    } catch (err) {
      const reason = engine.crashReason;
      const checkpoint = reason !== null && restart < restarts ? await opts.latestCheckpoint() : null;
      if (reason === null || checkpoint === null) throw err;
      opts.onRestart?.({ reason, checkpoint, restart: restart + 1, restarts });
    } finally {
      await engine.close();
    }
  }
}
