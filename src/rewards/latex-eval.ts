/**
 * Evaluates a normalized LaTeX answer that is a plain number: integers, decimals, fractions (a/b,
 * \frac{a}{b}), mixed numbers (1\frac{4}{5}), \sqrt, \pi, powers, products and sums, with implicit
 * multiplication (3\sqrt{13}, 288\pi). Anything else (variables, i, \infty, intervals) gives null.
 */
export function evalLatexNumber(text: string): number | null {
  const mixed = /^(-?)(\d+)\\frac\{(\d+)\}\{(\d+)\}$/.exec(text);
  if (mixed) {
    const value = Number(mixed[2]) + Number(mixed[3]) / Number(mixed[4]);
    return mixed[1] ? -value : value;
  }
  const parser = new NumberParser(text);
  const value = parser.parse();
  return value !== null && Number.isFinite(value) ? value : null;
}

class NumberParser {
  private i = 0;
  constructor(private readonly s: string) {}

  parse(): number | null {
    const value = this.sum();
    return value !== null && this.i === this.s.length ? value : null;
  }

  private eat(token: string): boolean {
    if (!this.s.startsWith(token, this.i)) return false;
    // a macro name must not continue with letters (\pi vs \pitchfork)
    if (token.startsWith("\\") && /[a-zA-Z]/.test(this.s[this.i + token.length] ?? "")) return false;
    this.i += token.length;
    return true;
  }

  private sum(): number | null {
    let value = this.product();
    while (value !== null) {
      if (this.eat("+")) value = add(value, this.product());
      else if (this.eat("-")) value = add(value, negate(this.product()));
      else break;
    }
    return value;
  }

  private product(): number | null {
    let value = this.unary();
    while (value !== null) {
      if (this.eat("*") || this.eat("\\cdot") || this.eat("\\times")) value = mul(value, this.unary());
      else if (this.eat("/") || this.eat("\\div")) value = div(value, this.unary());
      else if (this.startsFactor()) value = mul(value, this.power());
      else break;
    }
    return value;
  }

  private startsFactor(): boolean {
    const rest = this.s.slice(this.i);
    return /^(?:\\frac|\\sqrt|\\pi|\(|\{)/.test(rest);
  }

  private unary(): number | null {
    if (this.eat("-")) return negate(this.unary());
    if (this.eat("+")) return this.unary();
    return this.power();
  }

  private power(): number | null {
    const base = this.atom();
    if (base === null || !this.eat("^")) return base;
    const exponent = this.s[this.i] === "{" ? this.atom() : this.digit();
    return exponent === null ? null : base ** exponent;
  }

  private digit(): number | null {
    const ch = this.s[this.i];
    if (!ch || !/\d/.test(ch)) return null;
    this.i++;
    return Number(ch);
  }

  private atom(): number | null {
    const number = /^(?:\d+(?:\.\d*)?|\.\d+)/.exec(this.s.slice(this.i));
    if (number) {
      this.i += number[0].length;
      return Number(number[0]);
    }
    if (this.eat("\\pi")) return Math.PI;
    if (this.eat("\\frac")) return div(this.group(), this.group());
    if (this.eat("\\sqrt")) return sqrt(this.group());
    if (this.s[this.i] === "(") return this.enclosed("(", ")");
    if (this.s[this.i] === "{") return this.group();
    return null;
  }

  private group(): number | null {
    return this.enclosed("{", "}");
  }

  private enclosed(open: string, close: string): number | null {
    if (!this.eat(open)) return null;
    const value = this.sum();
    return value !== null && this.eat(close) ? value : null;
  }
}

const add = (a: number, b: number | null) => (b === null ? null : a + b);
const negate = (a: number | null) => (a === null ? null : -a);
const mul = (a: number, b: number | null) => (b === null ? null : a * b);
const div = (a: number | null, b: number | null) => (a === null || b === null || b === 0 ? null : a / b);
const sqrt = (a: number | null) => (a === null || a < 0 ? null : Math.sqrt(a));
