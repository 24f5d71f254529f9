// `npm run bench`: every benchmark prints what it measured on this machine. `npm run bench -- NAME`
// runs the named ones only.
import os from "node:os";
import * as demo from "./demo.js";
import * as distill from "./distill.js";
import * as engine from "./engine.js";
import * as evalSpeed from "./eval.js";
import * as llamaCpp from "./llama-cpp.js";
import * as onnx from "./onnx.js";
import * as protocol from "./protocol.js";
import * as rewards from "./rewards.js";
import * as rl from "./rl.js";
import * as runtime from "./runtime.js";
import * as serve from "./serve.js";
import * as teacher from "./teacher.js";
import * as tools from "./tools.js";
import * as toolserver from "./toolserver.js";
import * as train from "./train.js";

type Bench = { name: string; run: () => Promise<void> };

const benches: Bench[] = [
  { name: "demo", run: demo.run },
  { name: "distill", run: distill.run },
  { name: "engine", run: engine.run },
  { name: "eval", run: evalSpeed.run },
  { name: "llama-cpp", run: llamaCpp.run },
  { name: "onnx", run: onnx.run },
  { name: "protocol", run: protocol.run },
  { name: "rewards", run: rewards.run },
  { name: "rl", run: rl.run },
  { name: "runtime", run: runtime.run },
  { name: "serve", run: serve.run },
  { name: "teacher", run: teacher.run },
  { name: "tools", run: tools.run },
  { name: "toolserver", run: toolserver.run },
  { name: "train", run: train.run },
];

const only = process.argv.slice(2);
console.log(`# coa bench — ${os.cpus()[0]?.model ?? "cpu"} × ${os.cpus().length}, node ${process.version}`);
console.log(`# command: npm run bench${only.length ? ` -- ${only.join(" ")}` : ""}\n`);
for (const b of benches) {
  if (only.length && !only.includes(b.name)) continue;
  console.log(`## ${b.name}`);
  await b.run();
  console.log();
}
