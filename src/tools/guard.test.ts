import { describe, expect, it } from "vitest";
import { guardTool, ToolFailure, truncateText } from "./guard.js";

const ctx = { timeoutMs: 200, maxChars: 100 };

describe("truncateText", () => {
  it("keeps short text and cuts long text to the budget with a marker saying how much went", () => {
    expect(truncateText("short", 10)).toEqual({ text: "short", truncated: false });
    const { text, truncated } = truncateText("x".repeat(5000), 100);
    expect(truncated).toBe(true);
    expect(text.length).toBeLessThanOrEqual(100);
    const kept = text.indexOf("\n");
    expect(text.slice(kept)).toBe(`\n…[truncated ${5000 - kept} chars]`);
  });
});

describe("guardTool", () => {
  it("times the body, truncates its text and passes its outcome on", async () => {
    const obs = await guardTool(ctx, async () => ({ ok: true, text: "y".repeat(500) }));
    expect(obs).toMatchObject({ ok: true, truncated: true });
    expect(obs.text).toMatch(/…\[truncated \d+ chars\]$/);
    expect(obs.elapsedMs).toBeGreaterThanOrEqual(0);
  });

  it("turns failures and exceptions into observations, never throwing", async () => {
    const failed = await guardTool(ctx, async () => {
      throw new ToolFailure("http_503", "Web search failed: HTTP 503");
    });
    expect(failed).toMatchObject({ ok: false, error: "http_503", text: "Web search failed: HTTP 503" });
    const crashed = await guardTool(ctx, async () => {
      throw new TypeError("boom");
    });
    expect(crashed).toMatchObject({ ok: false, error: "tool_error", text: "Tool failed: boom" });
  });

  it("aborts the body at the deadline and abandons one that ignores the signal", async () => {
    let sawAbort = false;
    const quick = { ...ctx, timeoutMs: 50 };
    const polite = await guardTool(quick, (signal) => {
      return new Promise((_, reject) =>
        signal.addEventListener("abort", () => {
          sawAbort = true;
          reject(signal.reason);
        }),
      );
    });
    expect(sawAbort).toBe(true);
    expect(polite).toMatchObject({ ok: false, error: "timeout", text: "Tool call timed out after 50 ms." });
    const stubborn = await guardTool(quick, () => new Promise(() => {}));
    expect(stubborn).toMatchObject({ ok: false, error: "timeout" });
  });

  it("reports a cancelled call as aborted", async () => {
    const controller = new AbortController();
    controller.abort();
    const obs = await guardTool({ ...ctx, signal: controller.signal }, (signal) =>
      Promise.reject(signal.reason),
    );
    expect(obs).toMatchObject({ ok: false, error: "aborted" });
  });
});
