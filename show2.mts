import { readFileSync } from "node:fs";
import { readTokenizerFile } from "./src/model/index.ts";
const tok = await readTokenizerFile(process.argv[4]);
const lines = readFileSync(process.argv[2], "utf8").trim().split("\n");
for (const n of (process.argv[3] ?? "0").split(",").map(Number)) {
const r = JSON.parse(lines[n]);
console.log("=== ", r.id, "prompt", r.promptIds.length, "segs", r.segments.length, "reward", r.reward, JSON.stringify(r.answer ?? r.finish));
console.log(tok.decode(r.promptIds).slice(-400));
for (const s of r.segments) console.log(s.source === "tool" ? "\x1b[33m" + tok.decode(s.ids) + "\x1b[0m" : tok.decode(s.ids));
}
