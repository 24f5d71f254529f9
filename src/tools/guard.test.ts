import { describe, expect, it } from "vitest";
import { guardTool, ToolFailure, truncateText, withDeadline } from "./guard.js";

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

describe("withDeadline", () => {
  it("abandons a body that ignores its signal at the deadline when given no grace", async () => {
    let aborted = false;
    const result = await withDeadline(
      { timeoutMs: 30 },
      0,
      (signal) => {
        signal.addEventListener("abort", () => {
          aborted = true;
        });
        return new Promise<string>(() => {});
      },
      () => "gave up",
    );
    expect(result).toBe("gave up");
    expect(aborted).toBe(true);
  });

  it("passes on the body's result, or its exception, and forwards the caller's cancel", async () => {
    expect(
      await withDeadline(
        { timeoutMs: 1000 },
        0,
        async () => "done",
        () => "late",
      ),
    ).toBe("done");
    await expect(
      withDeadline(
        { timeoutMs: 1000 },
        0,
        () => Promise.reject(new Error("boom")),
        () => "late",
      ),
    ).rejects.toThrow("boom");
    const controller = new AbortController();
    controller.abort(new Error("stop"));
    const reason = await withDeadline(
      { timeoutMs: 1000, signal: controller.signal },
      0,
      async (signal) => (signal.reason as Error).message,
      () => "late",
    );
    expect(reason).toBe("stop");
  });
});
