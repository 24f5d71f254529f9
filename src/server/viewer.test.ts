import { existsSync } from "node:fs";
import { mkdtemp, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { chromium } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { sampleMasTrace, sampleTrajectory } from "./testing.js";
import { type RunningViewer, startViewer } from "./viewer.js";

const CHROMIUM = process.env.COA_CHROMIUM ?? "/usr/bin/chromium";
// The flags keep Chromium off the network this machine does not have.
const CHROMIUM_ARGS = [
  "--headless",
  "--no-sandbox",
  "--disable-gpu",
  "--disable-quic",
  "--no-first-run",
  "--disable-background-networking",
  "--disable-component-update",
  "--disable-sync",
];

const trajectory = sampleTrajectory("In which year was Corvel Ltd founded?", [
  {
    steps: [
      { type: "plan", text: "Search Corvel Ltd, read the founding year." },
      { type: "tool_call", tool: "wiki_search", args: "Corvel Ltd founded" },
    ],
    observation:
      "1. Corvel Ltd (https://world.local/wiki/Corvel_Ltd)\n   Corvel Ltd was founded in 1947 <b>by</b> Lio Tamsin.",
  },
  {
    steps: [
      { type: "suggested_answer", text: "1947" },
      { type: "double_check", text: "The article states 1947. Score: 5", score: 5 },
      { type: "answer", text: "1947" },
    ],
  },
]);

let viewer: RunningViewer;

beforeAll(async () => {
  const dir = await mkdtemp(path.join(tmpdir(), "coa-view-"));
  await writeFile(path.join(dir, "trajectories.jsonl"), `${JSON.stringify(trajectory)}\n`);
  await writeFile(path.join(dir, "traces.jsonl"), `${JSON.stringify(sampleMasTrace)}\n`);
  viewer = await startViewer({ paths: [dir], root: dir });
});
afterAll(() => viewer?.close());

describe("coa view over HTTP", () => {
  it("lists both records and escapes what tools returned", async () => {
    const list = await (await fetch(viewer.url)).text();
    expect(list).toContain("In which year was Corvel Ltd founded?");
    expect(list).toContain("Who founded the company that employs Ada Brand?");
    const detail = await (await fetch(`${viewer.url}r/1`)).text();
    expect(detail).toContain("founded in 1947 &lt;b&gt;by&lt;/b&gt; Lio Tamsin");
    expect(detail).not.toContain("<b>by</b>");
    expect((await fetch(`${viewer.url}r/99`)).status).toBe(404);
  });
});

describe.skipIf(!existsSync(CHROMIUM))("coa view in headless Chromium", () => {
  it("shows a trajectory's steps colored by role, with the observation folded", async () => {
    const browser = await chromium.launch({ executablePath: CHROMIUM, args: CHROMIUM_ARGS });
    try {
      const page = await browser.newPage({ viewport: { width: 1000, height: 700 } });
      await page.goto(viewer.url);
      await page.getByRole("link", { name: "In which year was Corvel Ltd founded?" }).click();
      await expect.poll(() => page.locator("h2").textContent()).toBe("In which year was Corvel Ltd founded?");

      const roles = await page.locator(".step").evaluateAll((els) =>
        els.map((el) => ({
          cls: el.className.replace("step ", ""),
          border: getComputedStyle(el).borderLeftColor,
        })),
      );
      expect(roles.map((r) => r.cls)).toEqual([
        "plan",
        "tool_call",
        "observation",
        "suggested_answer",
        "double_check",
        "answer",
      ]);
      expect(new Set(roles.map((r) => r.border)).size).toBe(roles.length);

      const observation = page.locator("details.observation");
      expect(await observation.evaluate((el) => (el as HTMLDetailsElement).open)).toBe(false);
      await observation.locator("summary").click();
      await expect.poll(() => observation.evaluate((el) => (el as HTMLDetailsElement).open)).toBe(true);
      expect(await page.locator(".double_check .label").textContent()).toBe("double check · score 5");

      const shot = await page.screenshot({ fullPage: true });
      expect(shot.subarray(1, 4).toString()).toBe("PNG");
      // A page with real content compresses far worse than a blank one (a blank 1000×700 PNG is ~5 KB).
      expect(shot.length).toBeGreaterThan(20_000);
    } finally {
      await browser.close();
    }
  });
});
