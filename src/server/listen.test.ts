import { Hono } from "hono";
import { describe, expect, it } from "vitest";
import { listenOn } from "./listen.js";

describe("listenOn", () => {
  const app = new Hono().get("/", (c) => c.text("up"));

  it("resolves with the port it bound, and rejects a taken one with the listen error", async () => {
    const first = await listenOn(app.fetch, "127.0.0.1", 0);
    try {
      expect(first.port).toBeGreaterThan(0);
      expect(await (await fetch(`http://127.0.0.1:${first.port}/`)).text()).toBe("up");
      await expect(listenOn(app.fetch, "127.0.0.1", first.port)).rejects.toMatchObject({
        code: "EADDRINUSE",
      });
    } finally {
      await new Promise((resolve) => first.server.close(resolve));
    }
  });
});
