import type { Tokenizer } from "../../model/index.js";

/** How finely a tokenizer cuts a text: fewer tokens is a shorter sequence for the same text. */
export interface Fertility {
  chars: number;
  tokens: number;
  tokensPerChar: number;
  names: number;
  /** Mean tokens of a name as running text has it (after a space). */
  tokensPerName: number;
}

/**
 * The fertility of `tok` on a text (given as its character and token counts) and on a list of
 * names. A vocabulary learned from some worlds that cuts another world's names much finer than
 * its own has memorised names rather than learned their pieces.
 */
export function fertility(
  tok: Tokenizer,
  text: { chars: number; tokens: number },
  names: readonly string[],
): Fertility {
  const nameTokens = names.reduce((sum, n) => sum + tok.encode(` ${n}`).length, 0);
  return {
    chars: text.chars,
    tokens: text.tokens,
    tokensPerChar: text.chars ? text.tokens / text.chars : 0,
    names: names.length,
    tokensPerName: names.length ? nameTokens / names.length : 0,
  };
}
