// Vitest's global setup: every temp folder the suite makes goes under one folder of this run, removed
// when the run ends. Helpers across the suite make folders with mkdtemp and leave them (a run left ~250
// in /tmp); workers inherit TMPDIR, and so do the engines and launchers the tests start.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

export default function setup(): () => void {
  const dir = mkdtempSync(join(tmpdir(), "coa-test-"));
  process.env.TMPDIR = dir;
  return () => rmSync(dir, { recursive: true, force: true, maxRetries: 3 });
}
