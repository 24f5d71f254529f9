import { readdir, readFile } from "node:fs/promises";

/** The pids of this process's children that run the engine (Linux's /proc): a test sees none was left. */
export async function engineChildren(): Promise<number[]> {
  const pids: number[] = [];
  for (const entry of await readdir("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    const [stat, cmdline] = await Promise.all([
      readFile(`/proc/${entry}/stat`, "utf8").catch(() => ""),
      readFile(`/proc/${entry}/cmdline`, "utf8").catch(() => ""),
    ]);
    // The parent's pid is the second field after the parenthesized command name.
    const ppid = Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]);
    if (ppid === process.pid && cmdline.includes("coa_engine")) pids.push(Number(entry));
  }
  return pids;
}
