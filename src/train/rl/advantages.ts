/**
 * GRPO group-relative advantages: each sample's reward minus its group's mean, divided by the
 * group's standard deviation (unbiased, as verl computes it) unless `normalizeStd` is off
 * (Dr. GRPO). A group of one gets advantage 0.
 */
export function groupAdvantages(
  rewards: readonly number[],
  opts: { normalizeStd: boolean; eps?: number },
): number[] {
  const n = rewards.length;
  if (n < 2) return rewards.map(() => 0);
  const mean = rewards.reduce((a, b) => a + b, 0) / n;
  if (!opts.normalizeStd) return rewards.map((r) => r - mean);
  const variance = rewards.reduce((a, r) => a + (r - mean) ** 2, 0) / (n - 1);
  const std = Math.sqrt(variance);
  return rewards.map((r) => (r - mean) / (std + (opts.eps ?? 1e-6)));
}

/**
 * DAPO dynamic sampling's filter: a group whose rewards are all equal carries no learning signal
 * under group normalization, so it is dropped. Groups with fewer than two scored samples go too.
 */
export function isInformative(rewards: readonly number[]): boolean {
  return rewards.length >= 2 && rewards.some((r) => r !== rewards[0]);
}

/**
 * DAPO's soft overlong punishment: 0 up to `maxLength - buffer` tokens, then falling linearly to
 * -1 at `maxLength`, and -1 beyond.
 */
export function overlongPenalty(length: number, maxLength: number, buffer: number): number {
  const soft = maxLength - buffer;
  if (length <= soft) return 0;
  if (length > maxLength) return -1;
  return buffer > 0 ? (soft - length) / buffer : 0;
}
