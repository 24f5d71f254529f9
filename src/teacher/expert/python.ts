import type { ComputeFn, ProgramName } from "../../tasks/index.js";

// The programs the expert coder writes: plain Python for each computation a world question asks.

type Params = Record<string, number>;

const PROGRAMS: Record<ProgramName, (p: Params) => string> = {
  primes_below: ({ n }) =>
    [
      `n = ${n}`,
      "sieve = bytearray([1]) * n",
      "sieve[0] = sieve[1] = 0",
      "for i in range(2, int(n ** 0.5) + 1):",
      "    if sieve[i]:",
      "        sieve[i * i :: i] = bytearray(len(range(i * i, n, i)))",
      "print(sum(sieve))",
    ].join("\n"),
  digit_sum_power: ({ b, e }) => `print(sum(int(d) for d in str(${b} ** ${e})))`,
  modpow: ({ b, e, m }) => `print(pow(${b}, ${e}, ${m}))`,
  fib_mod: ({ n, m }) =>
    [`a, b = 1, 1`, `for _ in range(${n} - 2):`, `    a, b = b, (a + b) % ${m}`, `print(b % ${m})`].join(
      "\n",
    ),
  sum_divisible: ({ n, a, b }) =>
    `print(sum(k for k in range(1, ${n} + 1) if k % ${a} == 0 or k % ${b} == 0))`,
  collatz_steps: ({ n }) =>
    [
      `x, steps = ${n}, 0`,
      "while x != 1:",
      "    x = x // 2 if x % 2 == 0 else 3 * x + 1",
      "    steps += 1",
      "print(steps)",
    ].join("\n"),
  factorial_zeros: ({ n }) =>
    [`n, zeros, p = ${n}, 0, 5`, "while p <= n:", "    zeros += n // p", "    p *= 5", "print(zeros)"].join(
      "\n",
    ),
  lcm3: ({ a, b, c }) => `import math\nprint(math.lcm(${a}, ${b}, ${c}))`,
};

export function programCode(name: ProgramName, params: Params): string {
  return PROGRAMS[name](params);
}

/** The same program with its last line misspelled, the slip that a hurried coder makes. */
export function withTypo(code: string): string {
  const lines = code.split("\n");
  const last = lines.pop()!;
  return [...lines, last.replace(/print\(/, "prnt(")].join("\n");
}

/** Python for arithmetic on looked-up values; `signSlip` drops the abs() of an absolute difference. */
export function arithmeticCode(fn: ComputeFn, values: readonly number[], signSlip = false): string {
  if (fn === "sum") return `values = [${values.join(", ")}]\nprint(sum(values))`;
  const [a, b] = values;
  if (fn === "difference" || signSlip) return `print(${a} - ${b})`;
  return `print(abs(${a} - ${b}))`;
}

/** Python that prints which of two labelled values is the smaller (`min`) or the larger (`max`). */
export function comparisonCode(
  pick: "min" | "max",
  labels: readonly string[],
  values: readonly number[],
): string {
  const entries = labels.map((l, k) => `${JSON.stringify(l)}: ${values[k]}`).join(", ");
  return `values = {${entries}}\nprint(${pick}(values, key=values.get))`;
}

/** The program's answer when it prints a name: its last line of output. */
export function readLabel(output: string): string | null {
  return (
    output
      .split("\n")
      .map((l) => l.trim())
      .findLast(Boolean) ?? null
  );
}

/** The program's answer: the last line of output that is a plain integer. */
export function readNumber(output: string): string | null {
  const lines = output
    .split("\n")
    .map((l) => l.trim())
    .filter((l) => /^-?\d+$/.test(l));
  return lines.at(-1) ?? null;
}
