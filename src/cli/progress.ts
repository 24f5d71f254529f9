import cliProgress from "cli-progress";

export interface ItemProgress {
  /** `done` of `total` items; `note` is a short status shown after the counts. */
  update(done: number, total: number, note?: string): void;
  stop(): void;
}

const formatSeconds = (s: number): string =>
  !Number.isFinite(s)
    ? "?"
    : s < 90
      ? `${Math.round(s)}s`
      : s < 5400
        ? `${Math.round(s / 60)}m`
        : `${(s / 3600).toFixed(1)}h`;

/**
 * Progress of a job over items: a cli-progress bar on a TTY, otherwise a plain line (done, rate,
 * ETA) at most every `everyMs` and at the end, so logs stay readable.
 */
export function itemProgress(
  label: string,
  stream: NodeJS.WriteStream = process.stderr,
  everyMs = 5000,
): ItemProgress {
  const started = performance.now();
  const firstDone = { value: -1 };
  if (stream.isTTY) {
    const bar = new cliProgress.SingleBar(
      {
        format: `${label} [{bar}] {value}/{total} | {rate}/s | eta {eta_formatted} | {note}`,
        stream,
        hideCursor: true,
      },
      cliProgress.Presets.shades_classic,
    );
    let running = false;
    return {
      update(done, total, note = "") {
        if (firstDone.value < 0) firstDone.value = done;
        const rate = (done - firstDone.value) / ((performance.now() - started) / 1000 || 1);
        if (!running) bar.start(total, done, { note, rate: "0.0" });
        running = true;
        bar.update(done, { note, rate: rate.toFixed(1) });
      },
      stop: () => running && bar.stop(),
    };
  }
  let lastPrint = 0;
  return {
    update(done, total, note = "") {
      if (firstDone.value < 0) firstDone.value = done;
      const now = performance.now();
      if (done < total && now - lastPrint < everyMs) return;
      lastPrint = now;
      const rate = (done - firstDone.value) / ((now - started) / 1000 || 1);
      const eta = rate > 0 ? (total - done) / rate : Number.POSITIVE_INFINITY;
      stream.write(
        `${label} ${done}/${total} | ${rate.toFixed(2)}/s | eta ${formatSeconds(eta)}${note ? ` | ${note}` : ""}\n`,
      );
    },
    stop() {},
  };
}
