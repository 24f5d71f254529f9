/** The mean per-task difference of two systems on the same tasks, with its confidence interval. */
export interface PairedDifference {
  /** Tasks both systems have a score for; only they are compared. */
  tasks: number;
  /** Mean over those tasks of a − b; null when there are none. */
  mean: number | null;
  /** The 95% t-interval of that mean; null with fewer than two tasks. */
  low: number | null;
  high: number | null;
}

/**
 * How much system `a` beats system `b`, paired task by task: `a` and `b` map task ids to per-task
 * scores (avg@k, `EvalSummary.taskScores`). Pairing removes the spread between easy and hard tasks,
 * so a gain is told apart from noise with fewer tasks. The interval is Student's t over the
 * per-task differences (mean ± t(0.975, n−1)·sd/√n), deterministic, no resampling. When every
 * difference is equal (say both solve nothing), the interval has width 0.
 */
export function pairedDifference(
  a: Readonly<Record<string, number>>,
  b: Readonly<Record<string, number>>,
): PairedDifference {
  const diffs = Object.keys(a)
    .filter((id) => Object.hasOwn(b, id))
    .map((id) => a[id]! - b[id]!);
  const n = diffs.length;
  if (n === 0) return { tasks: 0, mean: null, low: null, high: null };
  const mean = diffs.reduce((s, d) => s + d, 0) / n;
  if (n < 2) return { tasks: n, mean, low: null, high: null };
  const variance = diffs.reduce((s, d) => s + (d - mean) ** 2, 0) / (n - 1);
  const half = tCritical(n - 1) * Math.sqrt(variance / n);
  return { tasks: n, mean, low: mean - half, high: mean + half };
}

/** The two-sided critical value of Student's t with `df` degrees of freedom: P(|T| > t) = 1 − level. */
export function tCritical(df: number, level = 0.95): number {
  // P(|T| > t) = I_x(df/2, 1/2) with x = df/(df + t²), increasing in x: bisect on x.
  let lo = 0;
  let hi = 1;
  for (let i = 0; i < 200; i++) {
    const x = (lo + hi) / 2;
    if (incompleteBeta(x, df / 2, 0.5) < 1 - level) lo = x;
    else hi = x;
  }
  const x = (lo + hi) / 2;
  return Math.sqrt((df * (1 - x)) / x);
}

/** The regularized incomplete beta function I_x(a, b) (Numerical Recipes, §6.4). */
function incompleteBeta(x: number, a: number, b: number): number {
  if (x <= 0) return 0;
  if (x >= 1) return 1;
  const front = Math.exp(logGamma(a + b) - logGamma(a) - logGamma(b) + a * Math.log(x) + b * Math.log(1 - x));
  // The continued fraction converges fast only on this side of the mean; use symmetry otherwise.
  return x < (a + 1) / (a + b + 2)
    ? (front * betaFraction(x, a, b)) / a
    : 1 - (front * betaFraction(1 - x, b, a)) / b;
}

/** The continued fraction of I_x(a, b), by the modified Lentz method. */
function betaFraction(x: number, a: number, b: number): number {
  const tiny = 1e-300;
  const clamp = (v: number) => (Math.abs(v) < tiny ? tiny : v);
  let c = 1;
  let d = 1 / clamp(1 - ((a + b) * x) / (a + 1));
  let h = d;
  for (let m = 1; m <= 300; m++) {
    const even = (m * (b - m) * x) / ((a + 2 * m - 1) * (a + 2 * m));
    d = 1 / clamp(1 + even * d);
    c = clamp(1 + even / c);
    h *= d * c;
    const odd = (-(a + m) * (a + b + m) * x) / ((a + 2 * m) * (a + 2 * m + 1));
    d = 1 / clamp(1 + odd * d);
    c = clamp(1 + odd / c);
    const step = d * c;
    h *= step;
    if (Math.abs(step - 1) < 1e-15) break;
  }
  return h;
}

/** ln Γ(x) for x > 0 (Lanczos, g = 7, 9 terms; about 15 significant digits). */
function logGamma(x: number): number {
  const g = [
    0.99999999999980993, 676.5203681218851, -1259.1392167224028, 771.32342877765313, -176.61502916214059,
    12.507343278686905, -0.13857109526572012, 9.9843695780195716e-6, 1.5056327351493116e-7,
  ];
  if (x < 0.5) return Math.log(Math.PI / Math.sin(Math.PI * x)) - logGamma(1 - x);
  const z = x - 1;
  let sum = g[0]!;
  for (let i = 1; i < g.length; i++) sum += g[i]! / (z + i);
  const t = z + 7.5;
  return 0.5 * Math.log(2 * Math.PI) + (z + 0.5) * Math.log(t) - t + Math.log(sum);
}
