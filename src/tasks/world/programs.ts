import type { ProgramName } from "./plan.js";
import type { Rng } from "./prng.js";

/** A pure computation question: no lookups, the code tool does the work. */
export interface ProgramQuestion {
  name: ProgramName;
  params: Record<string, number>;
  question: string;
  answer: string;
  difficulty: "easy" | "medium" | "hard";
}

type Maker = (rng: Rng) => ProgramQuestion;

const modpow = (b: bigint, e: bigint, m: bigint): bigint => {
  let result = 1n;
  let base = b % m;
  for (let x = e; x > 0n; x >>= 1n) {
    if (x & 1n) result = (result * base) % m;
    base = (base * base) % m;
  }
  return result;
};
const gcd = (a: number, b: number): number => (b === 0 ? a : gcd(b, a % b));

const MAKERS: Record<ProgramName, Maker> = {
  primes_below: (rng) => {
    const n = rng.int(1000, 50_000);
    const sieve = new Uint8Array(n);
    let count = 0;
    for (let i = 2; i < n; i++) {
      if (sieve[i]) continue;
      count++;
      for (let j = i * i; j < n; j += i) sieve[j] = 1;
    }
    return {
      name: "primes_below",
      params: { n },
      question: `How many prime numbers are less than ${n}?`,
      answer: String(count),
      difficulty: "easy",
    };
  },
  digit_sum_power: (rng) => {
    const b = rng.int(2, 9);
    const e = rng.int(40, 400);
    const digits = (BigInt(b) ** BigInt(e)).toString();
    const sum = [...digits].reduce((s, d) => s + Number(d), 0);
    return {
      name: "digit_sum_power",
      params: { b, e },
      question: `What is the sum of the decimal digits of ${b}^${e}?`,
      answer: String(sum),
      difficulty: "easy",
    };
  },
  modpow: (rng) => {
    const b = rng.int(2, 999);
    const e = rng.int(100, 100_000);
    const m = rng.int(1000, 99_999);
    return {
      name: "modpow",
      params: { b, e, m },
      question: `What is ${b}^${e} mod ${m}?`,
      answer: String(modpow(BigInt(b), BigInt(e), BigInt(m))),
      difficulty: "easy",
    };
  },
  fib_mod: (rng) => {
    const n = rng.int(50, 5000);
    const m = rng.int(97, 100_003);
    let [a, b] = [1, 1];
    for (let i = 3; i <= n; i++) [a, b] = [b, (a + b) % m];
    return {
      name: "fib_mod",
      params: { n, m },
      question: `Let F(1) = F(2) = 1 and F(k) = F(k-1) + F(k-2). What is F(${n}) mod ${m}?`,
      answer: String(b % m),
      difficulty: "medium",
    };
  },
  sum_divisible: (rng) => {
    const n = rng.int(100, 100_000);
    const a = rng.int(2, 13);
    let b = rng.int(2, 13);
    if (b === a) b = a === 13 ? 2 : a + 1;
    let sum = 0;
    for (let i = 1; i <= n; i++) if (i % a === 0 || i % b === 0) sum += i;
    return {
      name: "sum_divisible",
      params: { n, a, b },
      question: `What is the sum of all integers from 1 to ${n} that are divisible by ${a} or by ${b}?`,
      answer: String(sum),
      difficulty: "medium",
    };
  },
  collatz_steps: (rng) => {
    const n = rng.int(10, 100_000);
    let steps = 0;
    for (let x = n; x !== 1; steps++) x = x % 2 === 0 ? x / 2 : 3 * x + 1;
    return {
      name: "collatz_steps",
      params: { n },
      question: `Starting from ${n}, halve each even number and replace each odd number k by 3k + 1. How many steps does it take to reach 1?`,
      answer: String(steps),
      difficulty: "medium",
    };
  },
  factorial_zeros: (rng) => {
    const n = rng.int(50, 100_000);
    let zeros = 0;
    for (let p = 5; p <= n; p *= 5) zeros += Math.floor(n / p);
    return {
      name: "factorial_zeros",
      params: { n },
      question: `How many trailing zeros does ${n}! have?`,
      answer: String(zeros),
      difficulty: "easy",
    };
  },
  lcm3: (rng) => {
    const [a, b, c] = [rng.int(10, 999), rng.int(10, 999), rng.int(10, 999)];
    const lcm = (x: number, y: number) => (x / gcd(x, y)) * y;
    return {
      name: "lcm3",
      params: { a, b, c },
      question: `What is the least common multiple of ${a}, ${b} and ${c}?`,
      answer: String(lcm(lcm(a, b), c)),
      difficulty: "easy",
    };
  },
};

export const PROGRAM_NAMES = Object.keys(MAKERS) as ProgramName[];

export function makeProgramQuestion(rng: Rng, name: ProgramName): ProgramQuestion {
  return MAKERS[name](rng);
}
