import { createHash } from "node:crypto";
import path from "node:path";
import { DistillMeta } from "../distill/index.js";
import { SampleVerdict } from "../eval/index.js";
import type { Tokenizer } from "../model/index.js";
import { completionIds, parseCoa, type Step, type Trajectory } from "../protocol/index.js";
import type { MasTrace } from "../teacher/index.js";
import { escapeHtml } from "../util/index.js";
import type { LoadedRecords, ViewRecord } from "./records.js";

const STYLE = `
body{font:14px/1.45 system-ui,sans-serif;margin:0;color:#1d2330;background:#f6f7f9}
header{background:#1d2330;color:#fff;padding:10px 20px}header a{color:#9cc3ff}
main{padding:16px 20px;max-width:1100px}
table{border-collapse:collapse;width:100%;background:#fff}td,th{padding:5px 8px;border-bottom:1px solid #e3e6ea;text-align:left;vertical-align:top}
th{background:#eef0f3;font-weight:600}tr:hover td{background:#f0f6ff}
.q{max-width:520px}.num{text-align:right;font-variant-numeric:tabular-nums}
.ok{color:#16794a;font-weight:600}.bad{color:#b3261e;font-weight:600}
.step{border-left:5px solid #999;background:#fff;margin:8px 0;padding:6px 10px;border-radius:3px;white-space:pre-wrap}
.step .label{font:600 11px/1 monospace;text-transform:uppercase;letter-spacing:.05em;color:#555;display:block;margin-bottom:4px}
.step .label.inline{display:inline}
.think{border-color:#8a94a6}.plan{border-color:#2f6fde;background:#f2f6ff}.reflection{border-color:#e07b00;background:#fff7ec}
.suggested_answer{border-color:#7b3fd6;background:#f7f2ff}.double_check{border-color:#0f8f8f;background:#effafa}
.answer{border-color:#16794a;background:#effaf3}.tool_call{border-color:#c9a400;background:#fffbe6;font-family:monospace}
.observation{border-color:#b9bec7;background:#f3f4f6}.error{border-color:#b3261e;background:#fdeeee}
.agent{border-color:#8a94a6}.agent-manager{border-color:#2f6fde}.agent-searcher{border-color:#c9a400}.agent-coder{border-color:#7b3fd6}
.agent-critic{border-color:#e07b00}.agent-verifier{border-color:#0f8f8f}.agent-tool{border-color:#b9bec7;background:#f3f4f6}
.meta{color:#555;margin:4px 0 12px}.meta b{color:#1d2330}
details summary{cursor:pointer;color:#555}
`;

/** The one style sheet's hash, so the Content-Security-Policy can allow it and no other style. */
export const STYLE_HASH = `'sha256-${createHash("sha256").update(STYLE).digest("base64")}'`;

function page(title: string, body: string): string {
  return `<!doctype html><html lang="en"><head><meta charset="utf-8"><title>${escapeHtml(title)} · coa view</title><style>${STYLE}</style></head><body><header><a href="/">coa view</a> · ${escapeHtml(title)}</header><main>${body}</main></body></html>`;
}

/** Summary numbers shared by the listing and the detail header. */
function summarize(rec: ViewRecord) {
  if (rec.kind === "trajectory") {
    const t = rec.value;
    const s = t.stats;
    return {
      question: t.question,
      answer: t.answer,
      reward: t.reward ?? null,
      tokens: s.promptTokens + s.modelTokens + s.toolTokens,
      toolCalls: Object.values(s.toolCalls).reduce((a, b) => a + b, 0),
      status: t.finishReason,
    };
  }
  const m = rec.value;
  return {
    question: m.question,
    answer: m.finalAnswer,
    reward: m.reward,
    tokens: m.stats.tokensIn + m.stats.tokensOut,
    toolCalls: m.stats.toolCalls,
    status: m.error ? `error: ${m.error}` : "done",
  };
}

const rewardCell = (r: number | null) =>
  r === null ? "–" : `<span class="${r >= 1 ? "ok" : "bad"}">${Number(r.toFixed(3))}</span>`;

export function renderIndexPage(loaded: LoadedRecords, opts: { root: string; query: string }): string {
  const q = opts.query.trim().toLowerCase();
  const rows = loaded.records
    .map((rec, i) => ({ rec, i, s: summarize(rec) }))
    .filter(
      ({ s }) => !q || s.question.toLowerCase().includes(q) || (s.answer ?? "").toLowerCase().includes(q),
    );
  const rel = (f: string) => escapeHtml(path.relative(opts.root, f) || path.basename(f));
  const body = [
    `<form method="get"><input name="q" value="${escapeHtml(opts.query)}" placeholder="filter questions and answers" size="40"> <button>Filter</button></form>`,
    `<p class="meta"><b>${rows.length}</b> of ${loaded.records.length} records in ${loaded.files.length} file(s)`,
    ...loaded.skipped.map(
      (s) => `; skipped ${s.count} line(s) of ${rel(s.file)} (${escapeHtml(s.firstReason)})`,
    ),
    "</p><table><tr><th>#</th><th>kind</th><th>question</th><th>answer</th><th>reward</th><th class=num>tokens</th><th class=num>tool calls</th><th>finish</th><th>file:line</th></tr>",
    ...rows.map(
      ({ rec, i, s }) =>
        `<tr><td><a href="/r/${i}">${i}</a></td><td>${rec.kind === "mas" ? "MAS" : "CoA"}</td><td class="q"><a href="/r/${i}">${escapeHtml(s.question.slice(0, 160))}</a></td><td>${escapeHtml(s.answer ?? "–")}</td><td>${rewardCell(s.reward)}</td><td class=num>${s.tokens}</td><td class=num>${s.toolCalls}</td><td>${escapeHtml(s.status)}</td><td>${rel(rec.file)}:${rec.line}</td></tr>`,
    ),
    "</table>",
  ];
  return page("records", body.join(""));
}

function stepBody(step: Step): { label: string; text: string } {
  switch (step.type) {
    case "tool_call":
      return { label: `tool call · ${step.tool}`, text: step.args };
    case "double_check":
      return { label: `double check · score ${step.score ?? "?"}`, text: step.text };
    default:
      return { label: step.type.replace("_", " "), text: step.text };
  }
}

function renderTrajectory(t: Trajectory, tokenizers: ReadonlyMap<string, Tokenizer>): string {
  const tokenizer = tokenizers.get(t.tokenizer);
  const parts: string[] = [];
  if (!tokenizer) {
    parts.push(
      `<div class="step error">Token ids use the tokenizer "${escapeHtml(t.tokenizer)}", which this viewer cannot decode offline (no tokenizer file of that name beside the records); ${completionIds(t).length} completion tokens.</div>`,
    );
    return parts.join("");
  }
  for (const seg of t.segments) {
    const text = tokenizer.decode(seg.ids);
    if (seg.source === "tool") {
      const inner = text.replace(/^\s*<observation>/, "").replace(/<\/observation>\s*$/, "");
      parts.push(
        `<details class="step observation"><summary><span class="label inline">observation · ${seg.ids.length} tokens</span> ${escapeHtml(inner.trim().slice(0, 90))}…</summary>${escapeHtml(inner.trim())}</details>`,
      );
      continue;
    }
    const { steps, errors } = parseCoa(text, { profile: t.profile, modelOutput: true });
    for (const step of steps) {
      const { label, text: body } = stepBody(step);
      parts.push(
        `<div class="step ${step.type}"><span class="label">${escapeHtml(label)}</span>${escapeHtml(body)}</div>`,
      );
    }
    for (const e of errors) {
      parts.push(
        `<div class="step error"><span class="label">format error · ${e.kind}</span>${escapeHtml(e.message)}</div>`,
      );
    }
    parts.push(`<p class="meta">model turn · ${seg.ids.length} tokens</p>`);
  }
  return parts.join("");
}

function renderMas(m: MasTrace): string {
  return m.messages
    .map((msg) => {
      const cost = msg.from === "tool" ? "" : ` · ${msg.tokensIn} in / ${msg.tokensOut} out`;
      const label = `${msg.from} → ${msg.to} · ${msg.kind}${msg.score ? ` · score ${msg.score}` : ""}${cost}`;
      const text = msg.tool ? `${msg.tool.name}: ${msg.tool.args}` : msg.content;
      const cls = `step agent agent-${msg.from}`;
      if (msg.kind === "observation")
        return `<details class="${cls}"><summary><span class="label inline">${escapeHtml(label)}</span> ${escapeHtml(text.slice(0, 90))}…</summary>${escapeHtml(text)}</details>`;
      return `<div class="${cls}"><span class="label">${escapeHtml(label)}</span>${escapeHtml(text)}</div>`;
    })
    .join("");
}

/** The gold answers a trajectory carries: in eval's verdict or in distill's meta, whichever wrote it. */
function goldAnswers(t: Trajectory): string[] {
  const fromEval = SampleVerdict.shape.answers.safeParse(t.meta.eval?.answers);
  if (fromEval.success) return fromEval.data;
  return DistillMeta.shape.answers.safeParse(t.meta.distill?.answers).data ?? [];
}

export function renderRecordPage(
  rec: ViewRecord,
  index: number,
  opts: { root: string; tokenizers: ReadonlyMap<string, Tokenizer> },
): string {
  const { root } = opts;
  const s = summarize(rec);
  const gold = rec.kind === "mas" ? rec.value.answers : goldAnswers(rec.value);
  const header = `<h2>${escapeHtml(s.question)}</h2><p class="meta"><b>answer</b> ${escapeHtml(s.answer ?? "–")}${gold.length ? ` · <b>gold</b> ${escapeHtml(gold.join(" | "))}` : ""} · <b>reward</b> ${rewardCell(s.reward)} · <b>tokens</b> ${s.tokens} · <b>tool calls</b> ${s.toolCalls} · <b>finish</b> ${escapeHtml(s.status)} · ${escapeHtml(path.relative(root, rec.file))}:${rec.line}</p>`;
  const body =
    rec.kind === "trajectory" ? renderTrajectory(rec.value, opts.tokenizers) : renderMas(rec.value);
  return page(`record ${index}`, header + body);
}
