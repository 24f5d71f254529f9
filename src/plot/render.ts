import { parse, View } from "vega";
import { compile, type TopLevelSpec } from "vega-lite";

/** Size and labels shared by every chart. */
export interface ChartOptions {
  title?: string;
  xLabel?: string;
  yLabel?: string;
  /** Plot area size in pixels (axes and legend come on top). */
  width?: number;
  height?: number;
}

export const DEFAULT_WIDTH = 480;
export const DEFAULT_HEIGHT = 240;

/** Compiles a vega-lite spec and renders it to a standalone SVG string, headless (no browser, no canvas). */
export async function renderVegaLite(spec: TopLevelSpec): Promise<string> {
  const view = new View(parse(compile(spec).spec), { renderer: "none" });
  try {
    return await view.toSVG();
  } finally {
    view.finalize();
  }
}

/** The top-level fields every chart spec starts from. */
export function baseSpec(opts: ChartOptions) {
  return {
    $schema: "https://vega.github.io/schema/vega-lite/v6.json",
    ...(opts.title ? { title: opts.title } : {}),
    width: opts.width ?? DEFAULT_WIDTH,
    height: opts.height ?? DEFAULT_HEIGHT,
    background: "white",
  } as const;
}
