// `npm run bench`: every benchmark prints what it measured on this machine. `npm run bench -- NAME`
// runs the named ones only.
import os from "node:os";

type Bench = { name: string; run: () => Promise<void> };

const benches: Bench[] = [];

const only = process.argv.slice(2);
console.log(`# coa bench — ${os.cpus()[0]?.model ?? "cpu"} × ${os.cpus().length}, node ${process.version}`);
console.log(`# command: npm run bench${only.length ? ` -- ${only.join(" ")}` : ""}\n`);
for (const b of benches) {
  if (only.length && !only.includes(b.name)) continue;
  console.log(`## ${b.name}`);
  await b.run();
  console.log();
}
