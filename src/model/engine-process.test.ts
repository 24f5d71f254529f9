import { describe, expect, it } from "vitest";
import { engineGlibcTunables } from "./engine-process.js";

describe("engineGlibcTunables", () => {
  it("asks glibc's malloc for transparent huge pages, after the tunables the environment gives", () => {
    expect(engineGlibcTunables({})).toBe("glibc.malloc.hugetlb=1");
    expect(engineGlibcTunables({ GLIBC_TUNABLES: "glibc.malloc.arena_max=2" })).toBe(
      "glibc.malloc.arena_max=2:glibc.malloc.hugetlb=1",
    );
  });

  it("leaves a hugetlb the environment sets, and glibc's defaults under COA_ENGINE_MALLOC=glibc", () => {
    expect(engineGlibcTunables({ GLIBC_TUNABLES: "glibc.malloc.hugetlb=0" })).toBe("glibc.malloc.hugetlb=0");
    expect(engineGlibcTunables({ COA_ENGINE_MALLOC: "glibc" })).toBeUndefined();
    expect(
      engineGlibcTunables({ COA_ENGINE_MALLOC: "glibc", GLIBC_TUNABLES: "glibc.malloc.arena_max=2" }),
    ).toBe("glibc.malloc.arena_max=2");
  });
});
