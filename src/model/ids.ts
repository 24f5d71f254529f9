/**
 * Appends `items` to `target` in place. `target.push(...items)` passes every item as an argument and
 * overflows the call stack past ~120k items, which one long completion reaches; a loop has no limit.
 */
export function appendAll<T>(target: T[], items: readonly T[]): void {
  for (const item of items) target.push(item);
}
