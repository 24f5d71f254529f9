/** The arithmetic mean; 0 for no values. */
export const mean = (xs: readonly number[]): number =>
  xs.length ? xs.reduce((a, b) => a + b, 0) / xs.length : 0;

/** A fraction as a percentage with one decimal: 0.4567 → "45.7%". */
export const pct = (x: number): string => `${(100 * x).toFixed(1)}%`;
