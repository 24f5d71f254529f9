/** The string with its first character upper-cased. */
export const capitalize = (s: string): string => s.charAt(0).toUpperCase() + s.slice(1);

/** The text on one line (runs of whitespace made one space), cut to `max` characters with an ellipsis. */
export function oneLine(text: string, max: number): string {
  const flat = text.replace(/\s+/g, " ").trim();
  return flat.length > max ? `${flat.slice(0, max - 1)}…` : flat;
}
