import { describe, expect, it } from "vitest";
import { barChartSvg, histogramSvg, lineChartSvg } from "./index.js";

/** The accessible label vega writes on each bar, e.g. "tool calls: 1; count: 2". */
const bars = (svg: string) =>
  [...svg.matchAll(/aria-label="([^"]*)"[^>]*aria-roledescription="bar"/g)].map((m) => m[1]);

describe("histogramSvg", () => {
  it("draws one bar per distinct value in discrete mode, with the count of each", async () => {
    const svg = await histogramSvg([0, 1, 1, 3], {
      discrete: true,
      title: "Tool calls",
      xLabel: "tool calls",
    });
    expect(svg.startsWith("<svg")).toBe(true);
    expect(bars(svg)).toEqual([
      "tool calls: 0; count: 1",
      "tool calls: 1; count: 2",
      "tool calls: 3; count: 1",
    ]);
    expect(svg).toContain(">Tool calls</text>");
  });

  it("bins continuous values and keeps every value counted", async () => {
    const values = Array.from({ length: 200 }, (_, i) => i % 50);
    const svg = await histogramSvg(values, { maxBins: 5, xLabel: "tokens" });
    const counts = bars(svg).map((label) => Number(/count: (\d+)/.exec(label ?? "")?.[1]));
    expect(counts.length).toBeGreaterThan(1);
    expect(counts.length).toBeLessThanOrEqual(5);
    expect(counts.reduce((a, b) => a + b, 0)).toBe(200);
  });

  it("renders an empty chart for no values instead of failing", async () => {
    const svg = await histogramSvg([], { title: "nothing" });
    expect(svg).toContain(">nothing</text>");
    expect(bars(svg)).toEqual([]);
  });
});

describe("lineChartSvg", () => {
  it("draws one line per series with a legend entry for each", async () => {
    const svg = await lineChartSvg(
      [
        {
          name: "train",
          points: [
            { x: 1, y: 2 },
            { x: 2, y: 1 },
          ],
        },
        {
          name: "eval",
          points: [
            { x: 1, y: 3 },
            { x: 2, y: 2.5 },
          ],
        },
      ],
      { title: "loss", xLabel: "step", yLabel: "loss" },
    );
    expect(svg.match(/aria-roledescription="line mark"/g)?.length).toBe(2);
    expect(svg).toContain(">train</text>");
    expect(svg).toContain(">eval</text>");
  });
});

describe("barChartSvg", () => {
  it("keeps the given order and labels every bar with its value", async () => {
    const svg = await barChartSvg(
      [
        { label: "read", value: 10 },
        { label: "format", value: 7 },
        { label: "correct", value: 4 },
      ],
      { title: "funnel" },
    );
    const labels = [...svg.matchAll(/<text[^>]*>([^<]*)<\/text>/g)].map((m) => m[1]);
    expect(labels.indexOf("read")).toBeLessThan(labels.indexOf("format"));
    expect(labels.indexOf("format")).toBeLessThan(labels.indexOf("correct"));
    expect(labels).toEqual(expect.arrayContaining(["10", "7", "4"]));
  });
});
