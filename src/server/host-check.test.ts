import { describe, expect, it } from "vitest";
import { hostAllowed } from "./host-check.js";

describe("hostAllowed", () => {
  it("accepts the loopback names at the bound port", () => {
    const ok = hostAllowed("127.0.0.1", 8377);
    for (const h of ["127.0.0.1:8377", "localhost:8377", "LOCALHOST:8377", "[::1]:8377"])
      expect(ok(h)).toBe(true);
  });

  it("refuses other names, other ports, and a missing or malformed Host (DNS rebinding)", () => {
    const ok = hostAllowed("127.0.0.1", 8377);
    for (const h of [
      undefined,
      "",
      "evil.example:8377",
      "127.0.0.1.evil.example:8377",
      "localhost.evil.example:8377",
      "127.0.0.1:8378",
      "127.0.0.1",
      "127.0.0.1:8377:1",
      "10.0.0.5:8377",
    ])
      expect(ok(h)).toBe(false);
  });

  it("accepts an explicit bind host, and a bare name only on port 80", () => {
    expect(hostAllowed("viewer.lan", 9000)("viewer.lan:9000")).toBe(true);
    expect(hostAllowed("::1", 9000)("[::1]:9000")).toBe(true);
    expect(hostAllowed("127.0.0.1", 80)("localhost")).toBe(true);
  });

  it("bound to every address, accepts IP literals but still no domain names", () => {
    const ok = hostAllowed("0.0.0.0", 9000);
    expect(ok("192.168.1.20:9000")).toBe(true);
    expect(ok("[fe80::1]:9000")).toBe(true);
    expect(ok("evil.example:9000")).toBe(false);
  });
});
