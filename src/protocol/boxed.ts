/** The brace group starting at `open` (which must be "{"), without its braces; null if unbalanced. */
export function braceGroup(text: string, open: number): { inner: string; end: number } | null {
  if (text[open] !== "{") return null;
  let depth = 0;
  for (let i = open; i < text.length; i++) {
    const ch = text[i];
    if (ch === "\\") {
      i++; // an escaped brace such as \{ does not count
    } else if (ch === "{") {
      depth++;
    } else if (ch === "}") {
      depth--;
      if (depth === 0) return { inner: text.slice(open + 1, i), end: i + 1 };
    }
  }
  return null;
}

const BOX_COMMAND = /\\(?:boxed|fbox)(?![a-zA-Z])/g;

/**
 * The content of the last `\boxed{…}` (or `\fbox{…}`) in a text, nested braces included; the brace-less
 * form `\boxed 5` gives the next word. Null when there is no complete box.
 */
export function lastBoxed(text: string): string | null {
  const starts = [...text.matchAll(BOX_COMMAND)].map((m) => m.index + m[0].length);
  for (const start of starts.reverse()) {
    let i = start;
    while (text[i] === " ") i++;
    if (text[i] === "{") {
      const group = braceGroup(text, i);
      if (group) return group.inner;
    } else if (i > start) {
      const word = /^[^\s$]+/.exec(text.slice(i));
      if (word) return word[0];
    }
  }
  return null;
}
