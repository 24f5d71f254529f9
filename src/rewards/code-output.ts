/** A decimal literal in canonical form (sign, digits without leading/trailing zeros, exponent), or null. */
function canonicalDecimal(token: string): string | null {
  const m = /^([+-]?)(\d*)(?:\.(\d*))?(?:[eE]([+-]?\d+))?$/.exec(token);
  if (!m || !(m[2] || m[3])) return null;
  const frac = m[3] ?? "";
  let digits = (m[2] + frac).replace(/^0+/, "");
  let exp = Number(m[4] ?? 0) - frac.length;
  if (!digits) return "0";
  const trailing = digits.length - digits.replace(/0+$/, "").length;
  digits = digits.slice(0, digits.length - trailing);
  exp += trailing;
  return `${m[1] === "-" ? "-" : ""}${digits}e${exp}`;
}

function decimalsEqual(a: string, b: string): boolean {
  const ta = a.split(/\s+/);
  const tb = b.split(/\s+/);
  if (ta.length !== tb.length) return false;
  return ta.every((t, i) => {
    const ca = canonicalDecimal(t);
    return ca !== null && ca === canonicalDecimal(tb[i]!);
  });
}

function strippedLines(text: string): string[] {
  return text
    .trim()
    .split("\n")
    .map((line) => line.trim());
}

/**
 * LiveCodeBench's stdout check: strip the whole output, split into lines, strip each line; lines must
 * be equal, or hold the same whitespace-separated decimal numbers ("1.50" equals "1.5", exactly).
 */
export function outputsMatch(actual: string, expected: string): boolean {
  const got = strippedLines(actual);
  const want = strippedLines(expected);
  if (got.length !== want.length) return false;
  return got.every((line, i) => line === want[i] || decimalsEqual(line, want[i]!));
}
