/**
 * GRPO group-relative advantages: each sample's reward minus its group's mean, divided by the
 * group's standard deviation (unbiased, as verl computes it) unless `normalizeStd` is off
 * (Dr. GRPO). A group of one gets advantage 0. `negativeScale` (default 1) multiplies the advantages
 * below 0: under 1, the update pushes up the samples that did better more than it pushes down
 * those that did worse, which lowers the sampled policy's entropy.
 */
export function groupAdvantages(
  rewards: readonly number[],
  opts: { normalizeStd: boolean; negativeScale?: number; eps?: number },
): number[] {
  const n = rewards.length;
  if (n < 2) return rewards.map(() => 0);
  const mean = rewards.reduce((a, b) => a + b, 0) / n;
  const std = opts.normalizeStd
    ? Math.sqrt(rewards.reduce((a, r) => a + (r - mean) ** 2, 0) / (n - 1)) + (opts.eps ?? 1e-6)
    : 1;
  const negativeScale = opts.negativeScale ?? 1;
  return rewards.map((r) => {
    const a = (r - mean) / std;
    return a < 0 ? a * negativeScale : a;
  });
}

/**
 * The advantage one sampled token trains with: its sample's, except that a better sample's tokens
 * that sampling drew with a probability below `positiveMinProb` get none. Pushing a success's lucky
 * unlikely tokens up widens the sampled policy where the update should sharpen it; without that push
 * RL raised a strong student's sampled success where it had not (docs/learning.md, "Which sampled
 * failures RL should remove").
 */
export function tokenAdvantage(advantage: number, sampledLogprob: number, positiveMinProb?: number): number {
  const lucky = advantage > 0 && positiveMinProb !== undefined && sampledLogprob < Math.log(positiveMinProb);
  return lucky ? 0 : advantage;
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
