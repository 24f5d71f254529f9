// C0 controls (ESC starts ANSI/OSC sequences), DEL, C1 controls (0x9b is a one-byte CSI), and the
// bidi overrides/isolates that reorder what a terminal shows.
const CONTROL = /[\u0000-\u001f\u007f-\u009f\u202a-\u202e\u2066-\u2069]/g;

/**
 * Text safe to write to a terminal: every control character becomes a visible escape (`\x1b`,
 * `\n`, `\u202e`), so task text from a file can neither move the cursor nor hide what follows.
 */
export function printable(text: string): string {
  return text.replace(CONTROL, (c) => {
    const code = c.charCodeAt(0);
    if (c === "\n") return "\\n";
    if (c === "\t") return "\\t";
    if (c === "\r") return "\\r";
    return code <= 0xff ? `\\x${code.toString(16).padStart(2, "0")}` : `\\u${code.toString(16)}`;
  });
}
