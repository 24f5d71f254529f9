import { braceGroup } from "../protocol/index.js";

/** Units that may trail a numeric answer ("5.4 cents", "15 cm^2"); they do not change the value. */
const UNIT_WORDS = [
  "square units",
  "sq units",
  "units?",
  "cm",
  "mm",
  "km",
  "m",
  "in",
  "inch(?:es)?",
  "ft",
  "feet",
  "foot",
  "miles?",
  "meters?",
  "centimeters?",
  "degrees?",
  "cents?",
  "dollars?",
  "hours?",
  "minutes?",
  "seconds?",
  "days?",
  "mph",
];
/** A unit word after a number and a space: "5.4 cents", "15 cm^2". */
const TRAILING_UNIT = new RegExp(`^(.*[\\d}])\\s+(?:${UNIT_WORDS.join("|")})(?:\\^\\{?[23]\\}?)?$`);
/** `\text{ cm}`: a text group starting with a space annotates a unit. */
const TEXT_UNIT = /\\(?:text|mbox|textrm|mathrm)\{\s[^{}]*\}(?:\^\{?[23]\}?)?/g;
const TEXT_WRAPPER = /\\(?:text|textbf|textrm|textit|mathrm|mathbf|mbox|operatorname)\{([^{}]*)\}/g;
/** Spacing macros; a LaTeX line break `\\` is matched first so that its second backslash is not taken for `\ `. */
const SPACING = /\\\\|\\[!,:; ]|\\q?quad(?![a-zA-Z])|~/g;
const THOUSANDS = /^-?\d{1,3}(?:,\d{3})+(?:\.\d+)?$/;

/** `\frac12` → `\frac{1}{2}`, `\sqrt2` → `\sqrt{2}`: every argument of `macro` becomes a brace group. */
function braceArguments(text: string, macro: string, arity: number): string {
  let out = "";
  let i = 0;
  for (let at = text.indexOf(macro); at >= 0; at = text.indexOf(macro, i)) {
    out += text.slice(i, at) + macro;
    i = at + macro.length;
    if (/[a-zA-Z]/.test(text[i] ?? "")) continue; // a longer macro name such as \fraction
    for (let k = 0; k < arity && i < text.length; k++) {
      const group = braceGroup(text, i);
      if (group) {
        out += `{${group.inner}}`;
        i = group.end;
      } else if (text[i] === "\\") {
        const name = /^\\[a-zA-Z]+/.exec(text.slice(i))?.[0] ?? text[i]!;
        out += `{${name}}`;
        i += name.length;
      } else {
        out += `{${text[i]}}`;
        i++;
      }
    }
  }
  return out + text.slice(i);
}

/**
 * Canonical text of a math answer, so that equal answers written differently compare equal:
 * dollars, \left/\right, spacing macros, \text wrappers, degree signs, percent signs, trailing units,
 * "x =" prefixes and thousands separators go; \dfrac/\tfrac become \frac; macro arguments get braces;
 * all whitespace goes. A multiple-choice "(C)" becomes "C"; a plain word is lowercased.
 */
export function normalizeMath(answer: string): string {
  let s = answer.trim();
  s = s.replace(TEXT_UNIT, "");
  s = s.replace(TEXT_WRAPPER, "$1");
  s = s.replace(/\\\$|\$/g, "");
  s = s.replace(/\\(?:left|right|big|Big|bigl|bigr|Bigl|Bigr)(?![a-zA-Z])/g, "");
  s = s.replace(SPACING, (m) => (m === "\\\\" ? m : " "));
  s = s.replace(/\\[dt]frac(?![a-zA-Z])/g, "\\frac");
  s = s.replace(/\^\s*\{?\\circ\}?|\\circ|°|\\degree/g, "");
  s = s.replace(/\\%|%/g, "");
  s = s.trim().replace(/\.$/, "");
  s = s.replace(TRAILING_UNIT, "$1");
  s = s.replace(/\s+/g, "");
  s = s.replace(/^[a-zA-Z]\\in/, "");
  if ((s.match(/=/g) ?? []).length === 1) s = s.replace(/^[a-zA-Z]=/, "");
  s = braceArguments(s, "\\frac", 2);
  s = braceArguments(s, "\\sqrt", 1);
  s = s.replace(/([_^])\{(\w)\}/g, "$1$2");
  if (THOUSANDS.test(s)) s = s.replaceAll(",", "");
  const choice = /^\(([A-Ea-e])\)$/.exec(s);
  if (choice) return choice[1]!.toUpperCase();
  if (/^[a-zA-Z]{2,}$/.test(s)) return s.toLowerCase();
  return s;
}
