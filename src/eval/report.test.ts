import { describe, expect, it } from "vitest";
import { type Report, reportHtml, reportMarkdown } from "./report.js";

const report: Report = {
  title: "demo",
  sections: [
    {
      title: "Results",
      blocks: [
        { kind: "text", text: "AFM-RL does **not** beat `AFM-SFT`.\n\nSecond paragraph." },
        { kind: "table", header: ["system", "success"], rows: [["a|b", "50.0%"]] },
        { kind: "figure", file: "sft/loss.svg", svg: "<svg><text>loss</text></svg>", caption: "SFT loss" },
        { kind: "code", text: "<answer>Port Sheit</answer>" },
      ],
    },
  ],
};

describe("report rendering", () => {
  it("writes Markdown with tables, linked figures and fenced code", () => {
    const md = reportMarkdown(report);
    expect(md).toContain("# demo\n\n## Results");
    expect(md).toContain("| system | success |\n|---|---|\n| a\\|b | 50.0% |");
    expect(md).toContain("![SFT loss](sft/loss.svg)");
    expect(md).toContain("```\n<answer>Port Sheit</answer>\n```");
  });
  it("writes a self-contained page: inline SVG, escaped model text, bold and code spans", () => {
    const html = reportHtml(report);
    expect(html).toContain("<figure><svg><text>loss</text></svg><figcaption>SFT loss</figcaption></figure>");
    expect(html).toContain("<pre>&lt;answer&gt;Port Sheit&lt;/answer&gt;</pre>");
    expect(html).toContain("does <b>not</b> beat <code>AFM-SFT</code>.</p><p>Second paragraph.</p>");
    expect(html).not.toContain("<answer>");
  });
});
