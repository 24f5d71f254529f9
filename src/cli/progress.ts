import cliProgress from "cli-progress";

export interface ItemProgress {
  /** `done` of `total`; `note` is a short status shown after the counts. */
  update(done: number, total: number, note?: string): void;
  stop(): void;
}

export interface ProgressOptions {
  /** Where the bar and the plain lines go (default stderr). */
  stream?: NodeJS.WriteStream;
  /** Draw a bar (default: whether `stream` is a TTY). */
  tty?: boolean;
  /** Takes each plain line instead of `stream`. */
  print?: (line: string) => void;
  /**
   * When a plain line is due besides the last: every `ms` (default 5000), every `items` done, or
   * each time `done` crosses one of `parts` equal parts of the total.
   */
  every?: { ms: number } | { items: number } | { parts: number };
  /** Show `done` as a percentage of `total`: for units such as bytes that mean little as counts. */
  percent?: boolean;
}

const percentOf = (done: number, total: number) => (done >= total ? 100 : Math.floor((100 * done) / total));

const formatSeconds = (s: number): string =>
  !Number.isFinite(s)
    ? "?"
    : s < 90
      ? `${Math.round(s)}s`
      : s < 5400
        ? `${Math.round(s / 60)}m`
        : `${(s / 3600).toFixed(1)}h`;

/** Decides, per update, whether a plain line is due; the last one (done reaches total) always is. */
function plainLineDue(every: NonNullable<ProgressOptions["every"]>) {
  let lastMs = Number.NEGATIVE_INFINITY;
  let lastPart = 0;
  let printedTotal = false;
  return (done: number, total: number): boolean => {
    if (done >= total) {
      if (printedTotal) return false;
      printedTotal = true;
      return true;
    }
    if ("items" in every) return done % every.items === 0;
    if ("parts" in every) {
      const part = Math.floor((every.parts * done) / Math.max(1, total));
      if (part <= lastPart) return false;
      lastPart = part;
      return true;
    }
    const now = performance.now();
    if (now - lastMs < every.ms) return false;
    lastMs = now;
    return true;
  };
}

/**
 * Progress of a long job: a cli-progress bar on a TTY, otherwise plain lines (counts, rate, ETA,
 * note) only when due, so logs stay readable.
 */
export function itemProgress(label: string, opts: ProgressOptions = {}): ItemProgress {
  const stream = opts.stream ?? process.stderr;
  const started = performance.now();
  let firstDone: number | undefined;
  const rateAt = (done: number, now: number) => {
    firstDone ??= done;
    return (done - firstDone) / ((now - started) / 1000 || 1);
  };
  if (opts.tty ?? stream.isTTY === true) {
    const counts = opts.percent ? "{percentage}%" : "{value}/{total} | {rate}/s";
    const bar = new cliProgress.SingleBar(
      { format: `${label} [{bar}] ${counts} | eta {eta_formatted} | {note}`, stream, hideCursor: true },
      cliProgress.Presets.shades_classic,
    );
    let running = false;
    return {
      update(done, total, note = "") {
        const rate = rateAt(done, performance.now()).toFixed(1);
        if (!running) bar.start(total, done, { note, rate });
        running = true;
        bar.update(done, { note, rate });
      },
      stop() {
        if (running) bar.stop();
        running = false;
      },
    };
  }
  const print = opts.print ?? ((line: string) => stream.write(`${line}\n`));
  const due = plainLineDue(opts.every ?? { ms: 5000 });
  return {
    update(done, total, note = "") {
      const rate = rateAt(done, performance.now());
      if (!due(done, total)) return;
      const parts = [`${label}: ${opts.percent ? `${percentOf(done, total)}%` : `${done}/${total}`}`];
      if (!opts.percent) parts.push(`${rate.toFixed(2)}/s`);
      if (done < total) parts.push(`eta ${formatSeconds(rate > 0 ? (total - done) / rate : Number.NaN)}`);
      print(`${parts.join(" | ")}${note ? ` (${note})` : ""}`);
    },
    stop() {},
  };
}
