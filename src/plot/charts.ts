import type { TopLevelSpec } from "vega-lite";
import { baseSpec, type ChartOptions, renderVegaLite } from "./render.js";

/** Counts have no fractional ticks. */
const WHOLE = { tickMinStep: 1 } as const;

export interface HistogramOptions extends ChartOptions {
  /** Upper bound on the number of bins for continuous values (default 30). */
  maxBins?: number;
  /** One bar per distinct value (for small integer counts such as tool calls or turns). */
  discrete?: boolean;
}

/** Distribution of `values` as an SVG bar histogram. */
export function histogramSvg(values: readonly number[], opts: HistogramOptions = {}): Promise<string> {
  const x = opts.discrete
    ? {
        field: "value",
        type: "ordinal" as const,
        sort: "ascending" as const,
        title: opts.xLabel ?? "value",
        axis: { labelAngle: 0 },
      }
    : {
        field: "value",
        type: "quantitative" as const,
        bin: { maxbins: opts.maxBins ?? 30 },
        title: opts.xLabel ?? "value",
      };
  const spec = {
    ...baseSpec(opts),
    data: { values: values.map((value) => ({ value })) },
    mark: { type: "bar", tooltip: true },
    encoding: {
      x,
      y: { aggregate: "count", type: "quantitative", title: opts.yLabel ?? "count", axis: WHOLE },
    },
  } as TopLevelSpec;
  return renderVegaLite(spec);
}

export interface Series {
  name: string;
  points: readonly { x: number; y: number }[];
}

export interface LineChartOptions extends ChartOptions {
  /** Draw a dot on every point (default true when a series has at most 50 points). */
  points?: boolean;
  /** Log-scale y axis, for losses spanning orders of magnitude. */
  logY?: boolean;
}

/** One line per series, colored by series name, e.g. training loss and eval loss against step. */
export function lineChartSvg(series: readonly Series[], opts: LineChartOptions = {}): Promise<string> {
  const rows = series.flatMap((s) => s.points.map((p) => ({ series: s.name, x: p.x, y: p.y })));
  const longest = Math.max(0, ...series.map((s) => s.points.length));
  const spec = {
    ...baseSpec(opts),
    data: { values: rows },
    mark: { type: "line", point: opts.points ?? longest <= 50, tooltip: true },
    encoding: {
      x: { field: "x", type: "quantitative", title: opts.xLabel ?? "x" },
      y: {
        field: "y",
        type: "quantitative",
        title: opts.yLabel ?? "y",
        scale: opts.logY ? { type: "log" } : { zero: false },
      },
      color: { field: "series", type: "nominal", title: null },
    },
  } as TopLevelSpec;
  return renderVegaLite(spec);
}

export interface Bar {
  label: string;
  value: number;
}

/** Horizontal bars in the given order, each labelled with its value (e.g. a filter funnel). */
export function barChartSvg(bars: readonly Bar[], opts: ChartOptions = {}): Promise<string> {
  const y = { field: "label", type: "nominal", sort: null, title: opts.yLabel ?? null };
  const x = { field: "value", type: "quantitative", title: opts.xLabel ?? "count", axis: WHOLE };
  const spec = {
    ...baseSpec(opts),
    data: { values: bars.map((b) => ({ ...b })) },
    encoding: { y, x },
    layer: [
      { mark: { type: "bar", tooltip: true } },
      {
        mark: { type: "text", align: "left", dx: 3 },
        encoding: { text: { field: "value", type: "quantitative" } },
      },
    ],
  } as TopLevelSpec;
  return renderVegaLite(spec);
}
