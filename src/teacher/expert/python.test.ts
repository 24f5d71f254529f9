import { describe, expect, it } from "vitest";
import { probeSandbox, runPython } from "../../tools/index.js";
import { arithmeticCode } from "./python.js";

const sandbox = await probeSandbox().then(
  () => true,
  () => false,
);

describe("arithmeticCode", () => {
  it("writes each value as the text wrote it, so a student copies rather than rewrites it", () => {
    expect(arithmeticCode("sum", ["88,455", "22,967"])).toBe(
      'values = [int(v.replace(",", "")) for v in ["88,455", "22,967"]]\nprint(sum(values))',
    );
  });

  it.runIf(sandbox)("computes sums and differences of separated counts and plain years", async () => {
    const out = async (code: string) => (await runPython({ code })).stdout.trim();
    expect(await out(arithmeticCode("sum", ["88,455", "22,967"]))).toBe("111422");
    expect(await out(arithmeticCode("difference", ["8,568", "67,304"]))).toBe("-58736");
    expect(await out(arithmeticCode("abs_difference", ["1829", "1783"]))).toBe("46");
    // The slip a hurried coder makes: the absolute value forgotten.
    expect(await out(arithmeticCode("abs_difference", ["1783", "1829"], true))).toBe("-46");
  });
});
