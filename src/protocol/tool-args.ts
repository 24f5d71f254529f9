/** A `<code>` tool call's program and optional standard input. */
export interface CodeArgs {
  code: string;
  stdin?: string;
}

// A fence line: three backticks, an optional language label, a newline; the body ends at a line of
// three backticks (or at backticks right after the last body line).
const FENCED_BLOCK = /```[ \t]*([A-Za-z0-9_+-]*)[ \t]*\r?\n([\s\S]*?)\r?\n?```/g;
const CODE_LANGS = new Set(["", "python", "python3", "py"]);

/**
 * The fenced python block inside a `<code>` tool call, plus an optional ```stdin block. The first
 * block labelled python (or unlabelled) is the program. Null when there is no complete code fence:
 * the parser reports that as `missing_code_fence`, the code tool as an argument error.
 */
export function extractCode(args: string): CodeArgs | null {
  let code: string | undefined;
  let stdin: string | undefined;
  for (const m of args.matchAll(FENCED_BLOCK)) {
    const lang = m[1].toLowerCase();
    if (code === undefined && CODE_LANGS.has(lang)) code = m[2];
    else if (stdin === undefined && lang === "stdin") stdin = m[2];
  }
  if (code === undefined) return null;
  return stdin === undefined ? { code } : { code, stdin };
}

/** The text of a `<code>` tool call for a program (and stdin): the inverse of `extractCode`. */
export function renderCodeArgs({ code, stdin }: CodeArgs): string {
  const program = `\`\`\`python\n${code}\n\`\`\``;
  return stdin === undefined ? program : `${program}\n\`\`\`stdin\n${stdin}\n\`\`\``;
}

const MARKDOWN_LINK = /^\[[^\]]*\]\((\S+?)\)$/;

/**
 * The URLs of a `<crawl_page>` call: `url1 | url2`, each possibly a markdown link `[title](url)`
 * or wrapped in angle brackets. Empty entries are dropped.
 */
export function splitUrls(args: string): string[] {
  return args
    .split("|")
    .map((part) => part.trim())
    .map((part) => MARKDOWN_LINK.exec(part)?.[1] ?? part.replace(/^<(.*)>$/, "$1"))
    .filter((url) => url.length > 0);
}

/** A search query as the search tools use it: the inner text with whitespace runs collapsed. */
export function normalizeQuery(args: string): string {
  return args.replace(/\s+/g, " ").trim();
}
