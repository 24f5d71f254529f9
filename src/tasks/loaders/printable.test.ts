import { expect, it } from "vitest";
import { printable } from "./printable.js";

it("printable shows control characters as escapes and leaves other text alone", () => {
  expect(printable("plain Röntgen — 数学 $x^2$")).toBe("plain Röntgen — 数学 $x^2$");
  expect(printable("\u001b[31mred\u001b[0m")).toBe("\\x1b[31mred\\x1b[0m");
  expect(printable("\u001b]0;pwned\u0007title")).toBe("\\x1b]0;pwned\\x07title");
  expect(printable("a\nb\tc\rd\u0000\u007f\u009b2J")).toBe("a\\nb\\tc\\rd\\x00\\x7f\\x9b2J");
  expect(printable("abc\u202etxt.exe")).toBe("abc\\u202etxt.exe");
});
