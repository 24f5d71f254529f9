import { Readability } from "@mozilla/readability";
import { parseHTML } from "linkedom";

export interface PageText {
  title: string;
  text: string;
}

/** Below this much article text, Readability probably picked the wrong part of the page. */
const MIN_ARTICLE_CHARS = 200;

const SKIPPED = new Set(["SCRIPT", "STYLE", "NOSCRIPT", "TEMPLATE", "SVG", "CANVAS", "IFRAME", "HEAD"]);
// Page furniture the plain-text fallback leaves out.
const FURNITURE = new Set(["NAV", "HEADER", "FOOTER", "ASIDE", "FORM", "BUTTON"]);
// Blocks and the blank lines around them: 2 = paragraph break, 1 = line break.
const BLOCK_BREAKS: Record<string, number> = {
  P: 2,
  H1: 2,
  H2: 2,
  H3: 2,
  H4: 2,
  H5: 2,
  H6: 2,
  UL: 2,
  OL: 2,
  TABLE: 2,
  BLOCKQUOTE: 2,
  PRE: 2,
  FIGURE: 2,
  SECTION: 2,
  ARTICLE: 2,
  DIV: 1,
  MAIN: 1,
  LI: 1,
  TR: 1,
  DL: 1,
  DT: 1,
  DD: 1,
  FIGCAPTION: 1,
  HR: 1,
};

interface DomNode {
  nodeType: number;
  nodeName: string;
  textContent: string | null;
  childNodes: ArrayLike<DomNode>;
}

const ELEMENT_NODE = 1;
const TEXT_NODE = 3;
const DOCUMENT_NODE = 9;

/** Text of a DOM subtree with line breaks at block boundaries, list items as `- `, cells `|`-separated. */
function blockText(root: DomNode, skip: ReadonlySet<string>): string {
  // Strings are text; numbers ask for at least that many newlines at this point.
  const parts: Array<string | number> = [];
  const walk = (node: DomNode) => {
    if (node.nodeType === TEXT_NODE) {
      parts.push((node.textContent ?? "").replace(/\s+/g, " "));
      return;
    }
    if (node.nodeType !== ELEMENT_NODE && node.nodeType !== DOCUMENT_NODE) return;
    const name = node.nodeName.toUpperCase();
    if (skip.has(name)) return;
    if (name === "BR") {
      parts.push("\n");
      return;
    }
    const breaks = BLOCK_BREAKS[name] ?? 0;
    if (breaks) parts.push(breaks);
    if (name === "LI") parts.push("- ");
    if (name === "TD" || name === "TH") parts.push("\t");
    for (const child of Array.from(node.childNodes)) walk(child);
    if (breaks) parts.push(breaks);
  };
  walk(root);
  let out = "";
  let pending = 0;
  for (const part of parts) {
    if (typeof part === "number") {
      pending = Math.max(pending, part);
    } else if (part.trim() !== "" || part === "\n") {
      if (pending && out !== "") out += "\n".repeat(pending);
      out += pending ? part.trimStart() : part;
      pending = 0;
    } else if (!pending) {
      out += part;
    }
  }
  return out
    .split("\n")
    .map((line) =>
      line
        .replace(/\s*\t\s*/g, " | ")
        .replace(/ {2,}/g, " ")
        .replace(/^[ |]+|[ |]+$/g, ""),
    )
    .join("\n")
    .replace(/\n{3,}/g, "\n\n")
    .trim();
}

function parseDocument(html: string) {
  // linkedom only builds <html>/<body> when the markup has them; fragments get wrapped.
  return parseHTML(/<html[\s>]/i.test(html) ? html : `<!doctype html><html><body>${html}</body></html>`)
    .document;
}

/**
 * Readable text of an HTML page: the main article found by Readability, or, when it finds none (or
 * too little), the page's visible text without scripts, styles and navigation.
 */
export function htmlToText(html: string): PageText {
  const doc = parseDocument(html);
  const pageTitle = (doc.title ?? "").trim();
  let article: ReturnType<Readability["parse"]> = null;
  try {
    article = new Readability(doc as unknown as Document).parse();
  } catch {
    // Readability throws on some malformed documents; the fallback below still reads them.
  }
  if (article?.content) {
    const body = parseDocument(article.content).body;
    const text = body ? blockText(body as unknown as DomNode, SKIPPED) : "";
    if (text.length >= MIN_ARTICLE_CHARS) return { title: (article.title ?? pageTitle).trim(), text };
  }
  const fresh = parseDocument(html);
  const root = (fresh.body ?? fresh.documentElement) as unknown as DomNode | null;
  const text = root ? blockText(root, new Set([...SKIPPED, ...FURNITURE])) : "";
  return { title: pageTitle, text };
}
