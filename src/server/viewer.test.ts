import { existsSync } from "node:fs";
import { mkdtemp, writeFile } from "node:fs/promises";
import net from "node:net";
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

/** A raw HTTP exchange, so the Host header and body can be whatever a hostile page or client sends. */
function rawRequest(head: string, body = ""): Promise<{ status: number; text: string }> {
  const port = Number(new URL(viewer.url).port);
  return new Promise((resolve, reject) => {
    let reply = "";
    const socket = net.connect(port, "127.0.0.1", () =>
      socket.write(`${head.replaceAll("PORT", String(port))}\r\nConnection: close\r\n\r\n${body}`),
    );
    socket.on("data", (d) => {
      reply += d;
    });
    // The server answers before reading an oversized body; writing the rest may then fail.
    socket.on("error", (err: NodeJS.ErrnoException) => (err.code === "ECONNRESET" ? undefined : reject(err)));
    socket.on("close", () =>
      resolve({ status: Number(reply.split(" ")[1]), text: reply.slice(reply.indexOf("\r\n\r\n") + 4) }),
    );
  });
}

describe("coa view against hostile requests", () => {
  it("refuses a Host header that is not its own (DNS rebinding) with 403", async () => {
    for (const host of ["evil.example", "evil.example:PORT", "127.0.0.1.evil.example:PORT", "127.0.0.1:1"]) {
      const res = await rawRequest(`GET / HTTP/1.1\r\nHost: ${host}`);
      expect(res.status, host).toBe(403);
      expect(res.text).toContain("not an address this server listens on");
      expect(res.text).not.toContain("Corvel");
    }
    expect((await rawRequest("GET / HTTP/1.1")).status, "no Host").toBe(400);
    for (const host of ["127.0.0.1:PORT", "localhost:PORT"])
      expect((await rawRequest(`GET / HTTP/1.1\r\nHost: ${host}`)).status, host).toBe(200);
  });

  it("refuses request bodies with 413, by Content-Length or by streaming", async () => {
    const big = await rawRequest(
      `POST / HTTP/1.1\r\nHost: 127.0.0.1:PORT\r\nContent-Length: ${64 * 1024 * 1024}`,
      "x".repeat(64 * 1024),
    );
    expect(big.status).toBe(413);
    expect(big.text).toContain("takes no request body");
    const chunked = await rawRequest(
      "POST / HTTP/1.1\r\nHost: 127.0.0.1:PORT\r\nTransfer-Encoding: chunked",
      `1000\r\n${"x".repeat(4096)}\r\n0\r\n\r\n`,
    );
    expect(chunked.status).toBe(413);
  });

  it("sends a Content-Security-Policy that allows no scripts and only its own style sheet", async () => {
    const res = await fetch(viewer.url);
    const csp = res.headers.get("content-security-policy") ?? "";
    expect(csp).toContain("default-src 'none'");
    expect(csp).toMatch(/style-src 'sha256-[A-Za-z0-9+/=]+'/);
    expect(csp).not.toContain("unsafe-inline");
    expect(res.headers.get("x-content-type-options")).toBe("nosniff");
    expect(await res.text()).not.toContain("style=");
  });
});

describe.skipIf(!existsSync(CHROMIUM))("coa view in headless Chromium", () => {
  it("shows a trajectory's steps colored by role, with the observation folded", async () => {
    const browser = await chromium.launch({ executablePath: CHROMIUM, args: CHROMIUM_ARGS });
    try {
      const page = await browser.newPage({ viewport: { width: 1000, height: 700 } });
      // A policy violation shows up as a console error; the page must run clean under its own CSP.
      const errors: string[] = [];
      page.on("console", (m) => m.type() === "error" && errors.push(m.text()));
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
      expect(errors).toEqual([]);
    } finally {
      await browser.close();
    }
  });
});
