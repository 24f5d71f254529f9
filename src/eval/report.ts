import { escapeHtml } from "../util/index.js";

/** One block of a report; each renders to Markdown and to HTML from the same data. */
export type ReportBlock =
  | { kind: "text"; text: string }
  | { kind: "table"; header: string[]; rows: (string | number)[][] }
  | { kind: "figure"; file: string; svg: string; caption: string }
  | { kind: "code"; text: string };

export interface ReportSection {
  title: string;
  blocks: ReportBlock[];
}

export interface Report {
  title: string;
  sections: ReportSection[];
}

const mdCell = (c: string | number) => String(c).replaceAll("|", "\\|").replaceAll("\n", " ");

function blockMarkdown(b: ReportBlock): string {
  switch (b.kind) {
    case "text":
      return b.text;
    case "table":
      return [
        `| ${b.header.map(mdCell).join(" | ")} |`,
        `|${b.header.map(() => "---").join("|")}|`,
        ...b.rows.map((r) => `| ${r.map(mdCell).join(" | ")} |`),
      ].join("\n");
    case "figure":
      return `![${b.caption}](${b.file})`;
    case "code":
      return `\`\`\`\n${b.text}\n\`\`\``;
  }
}

/** Inline `code` and **bold** only: report text is ours, so this is all the Markdown it uses. */
const inlineHtml = (s: string) =>
  escapeHtml(s)
    .replace(/`([^`]+)`/g, "<code>$1</code>")
    .replace(/\*\*([^*]+)\*\*/g, "<b>$1</b>");

function blockHtml(b: ReportBlock): string {
  switch (b.kind) {
    case "text":
      return b.text
        .split(/\n\n+/)
        .map((p) => `<p>${inlineHtml(p)}</p>`)
        .join("");
    case "table":
      return `<table><tr>${b.header.map((h) => `<th>${inlineHtml(h)}</th>`).join("")}</tr>${b.rows
        .map((r) => `<tr>${r.map((c) => `<td>${inlineHtml(String(c))}</td>`).join("")}</tr>`)
        .join("")}</table>`;
    case "figure":
      return `<figure>${b.svg}<figcaption>${inlineHtml(b.caption)}</figcaption></figure>`;
    case "code":
      return `<pre>${escapeHtml(b.text)}</pre>`;
  }
}

export function reportMarkdown(r: Report): string {
  return `${[
    `# ${r.title}`,
    ...r.sections.flatMap((s) => [`## ${s.title}`, ...s.blocks.map(blockMarkdown)]),
  ].join("\n\n")}\n`;
}

const STYLE =
  "body{font:15px/1.5 system-ui,sans-serif;max-width:1000px;margin:24px auto;padding:0 16px;color:#1d2330}" +
  "table{border-collapse:collapse;margin:8px 0}td,th{border:1px solid #d5d9df;padding:4px 8px;text-align:left}" +
  "th{background:#eef0f3}pre{background:#f4f5f7;padding:10px;white-space:pre-wrap;font-size:13px}" +
  "figure{margin:12px 0}figcaption{color:#555;font-size:13px}code{background:#f0f1f3;padding:0 3px}";

/** A self-contained page: figures are inlined SVG, so the file can be mailed or archived alone. */
export function reportHtml(r: Report): string {
  const body = r.sections
    .map((s) => `<h2>${inlineHtml(s.title)}</h2>${s.blocks.map(blockHtml).join("")}`)
    .join("");
  return `<!doctype html><html lang="en"><head><meta charset="utf-8"><title>${escapeHtml(r.title)}</title><style>${STYLE}</style></head><body><h1>${escapeHtml(r.title)}</h1>${body}</body></html>\n`;
}
