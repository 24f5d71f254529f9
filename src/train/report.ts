import { writeFile } from "node:fs/promises";
import path from "node:path";
import { lineChartSvg } from "../plot/index.js";
import { writeFileAtomic } from "./run-folder.js";

export interface CurveSpec {
  /** File name under the run folder, e.g. "loss.svg". */
  file: string;
  title: string;
  /** Metric keys drawn as one line each against step. */
  keys: string[];
}

/** Draws each curve from the per-step metrics and writes report.md linking them. */
export async function writeCurvesReport(
  runDir: string,
  heading: string,
  records: ReadonlyArray<Record<string, unknown>>,
  curves: readonly CurveSpec[],
  summary: ReadonlyArray<[string, string | number]>,
): Promise<void> {
  const lines = [`# ${heading}`, "", ...summary.map(([k, v]) => `- ${k}: ${v}`), ""];
  for (const c of curves) {
    const series = c.keys.map((key) => ({
      name: key,
      points: records.flatMap((r) =>
        typeof r[key] === "number" && Number.isFinite(r[key])
          ? [{ x: r.step as number, y: r[key] as number }]
          : [],
      ),
    }));
    if (!series.some((s) => s.points.length)) continue;
    await writeFile(
      path.join(runDir, c.file),
      await lineChartSvg(series, { title: c.title, xLabel: "step", yLabel: c.keys.join(", ") }),
    );
    lines.push(`![${c.title}](${c.file})`, "");
  }
  await writeFileAtomic(path.join(runDir, "report.md"), lines.join("\n"));
}
