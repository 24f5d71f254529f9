import { lastBoxed } from "../protocol/index.js";
import { evalLatexNumber } from "./latex-eval.js";
import { normalizeMath } from "./latex-normalize.js";

/** Relative tolerance for numeric equality (absolute below magnitude 1). */
export const MATH_TOLERANCE = 1e-6;

/** The answer inside a model's final text: the last \boxed{…} if there is one, else the whole text. */
export function extractMathAnswer(prediction: string): string {
  return (lastBoxed(prediction) ?? prediction).trim();
}

function close(a: number, b: number): boolean {
  return Math.abs(a - b) <= MATH_TOLERANCE * Math.max(1, Math.abs(a), Math.abs(b));
}

/** Splits on `sep` where it is not inside (), [] or {}. */
function splitTopLevel(text: string, sep: string): string[] {
  const parts: string[] = [];
  let depth = 0;
  let start = 0;
  for (let i = 0; i < text.length; i++) {
    const ch = text[i]!;
    if ("([{".includes(ch)) depth++;
    else if (")]}".includes(ch)) depth--;
    else if (depth === 0 && text.startsWith(sep, i)) {
      parts.push(text.slice(start, i));
      start = i + sep.length;
      i += sep.length - 1;
    }
  }
  parts.push(text.slice(start));
  return parts;
}

const MATRIX = /^\\begin\{([pbv]?matrix)\}(.*)\\end\{\1\}$/;
/** Tuples and intervals keep order and their delimiters; a set \{…\} does not keep order. */
const ENCLOSED = /^(\\\{|[([])(.*)(\\\}|[)\]])$/;

function sameOrdered(a: string[], b: string[]): boolean {
  return a.length === b.length && a.every((x, i) => equivalentNormalized(x, b[i]!));
}

function sameUnordered(a: string[], b: string[]): boolean {
  if (a.length !== b.length) return false;
  const left = [...b];
  return a.every((x) => {
    const k = left.findIndex((y) => equivalentNormalized(x, y));
    if (k < 0) return false;
    left.splice(k, 1);
    return true;
  });
}

function equivalentNormalized(a: string, b: string): boolean {
  const na = normalizeMath(a);
  const nb = normalizeMath(b);
  if (na === nb) return true;
  const va = evalLatexNumber(na);
  const vb = evalLatexNumber(nb);
  if (va !== null && vb !== null) return close(va, vb);
  const ma = MATRIX.exec(na);
  const mb = MATRIX.exec(nb);
  if (ma && mb) return sameOrdered(ma[2]!.split(/\\\\|&/), mb[2]!.split(/\\\\|&/));
  const ea = ENCLOSED.exec(na);
  const eb = ENCLOSED.exec(nb);
  if (ea && eb && ea[1] === eb[1] && ea[3] === eb[3]) {
    const [pa, pb] = [splitTopLevel(ea[2]!, ","), splitTopLevel(eb[2]!, ",")];
    return ea[1] === "\\{" ? sameUnordered(pa, pb) : sameOrdered(pa, pb);
  }
  for (const sep of ["\\cup", ","]) {
    const [pa, pb] = [splitTopLevel(na, sep), splitTopLevel(nb, sep)];
    if (pa.length > 1 && pb.length > 1) return sep === "," ? sameUnordered(pa, pb) : sameOrdered(pa, pb);
  }
  return false;
}

/**
 * Whether a predicted math answer equals a gold one: the last \boxed{} of the prediction (or all of
 * it) against the gold, after LaTeX normalization, then by value (fractions, decimals, leading zeros,
 * thousands separators, \sqrt and \pi products within MATH_TOLERANCE), then element-wise for tuples,
 * intervals, matrices, sets and comma lists (the last two in any order).
 */
export function mathEquivalent(prediction: string, gold: string): boolean {
  return equivalentNormalized(extractMathAnswer(prediction), extractMathAnswer(gold));
}
