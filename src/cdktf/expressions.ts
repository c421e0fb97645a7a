// The part of Terraform's expression language that synthesized CDKTF stacks use and kms-sync can
// evaluate without Terraform: template strings ("a-${var.x}"), references (var.*, local.*,
// kms_*.NAME.ATTR, data.kms_*.NAME.ATTR), literals (strings, numbers, booleans, null, lists,
// objects) and a few pure functions. Anything else (operators, conditionals, for, splats, template
// directives, other functions) is an error that says what and why: kms-sync never guesses.
import type { JsonValue } from '../model/index.js';

export type Expr =
  | { k: 'lit'; v: JsonValue }
  | { k: 'tpl'; parts: Array<string | Expr> }
  | { k: 'ref'; parts: Array<string | number>; text: string }
  | { k: 'call'; name: string; args: Expr[]; text: string }
  | { k: 'list'; items: Expr[] }
  | { k: 'obj'; entries: Array<[Expr, Expr]> };

/** An expression kms-sync cannot read or evaluate; the message says why. */
export class ExpressionError extends Error {
  override name = 'ExpressionError';
}

// ------------------------------------------------------------------------------------ templates

/**
 * Parses a string value of cdk.tf.json as a Terraform template: literal text, `${...}`
 * interpolations, `$${` and `%%{` escapes.
 */
export function parseTemplate(text: string): Expr {
  const parts: Array<string | Expr> = [];
  let lit = '';
  let i = 0;
  while (i < text.length) {
    if (text.startsWith('$${', i)) {
      lit += '${';
      i += 3;
      continue;
    }
    if (text.startsWith('%%{', i)) {
      lit += '%{';
      i += 3;
      continue;
    }
    if (text.startsWith('%{', i)) throw new ExpressionError('template directives (%{if}, %{for}) are not supported');
    if (text.startsWith('${', i)) {
      if (lit) {
        parts.push(lit);
        lit = '';
      }
      const p = new Parser(text, i + 2);
      if (p.peekChar() === '~') throw new ExpressionError('whitespace strip markers (${~) are not supported');
      const e = p.expression();
      p.skipSpace();
      if (p.peekChar() === '~') throw new ExpressionError('whitespace strip markers (~}) are not supported');
      if (p.peekChar() !== '}') p.unsupported();
      parts.push(e);
      i = p.pos + 1;
      continue;
    }
    lit += text[i];
    i++;
  }
  if (lit || parts.length === 0) parts.push(lit);
  if (parts.length === 1 && typeof parts[0] === 'string') return { k: 'lit', v: parts[0] };
  return { k: 'tpl', parts };
}

/** Whether a string holds an interpolation or directive (and so is not plain text). */
export function hasInterpolation(text: string): boolean {
  return /(^|[^$])\$\{|(^|[^%])%\{/.test(text);
}

/** Parses an HCL body of `name = value` lines (terraform.tfvars): literals only are evaluated later. */
export function parseAttributes(text: string): Array<[string, Expr]> {
  const p = new Parser(text, 0);
  const out: Array<[string, Expr]> = [];
  for (;;) {
    p.skipSpace();
    if (p.pos >= text.length) return out;
    const name = p.identifier();
    if (!name) throw new ExpressionError(`expected an attribute name at line ${p.line()}`);
    p.skipSpace();
    if (p.peekChar() !== '=') throw new ExpressionError(`expected "=" after ${name} at line ${p.line()}`);
    p.pos++;
    out.push([name, p.expression()]);
  }
}

// ------------------------------------------------------------------------------------ parser

const IDENT = /[A-Za-z_][A-Za-z0-9_-]*/y;
const NUMBER = /-?\d+(\.\d+)?([eE][+-]?\d+)?/y;

class Parser {
  readonly text: string;
  pos: number;
  constructor(text: string, pos: number) {
    this.text = text;
    this.pos = pos;
  }

  line(): number {
    return this.text.slice(0, this.pos).split('\n').length;
  }

  peekChar(): string {
    return this.text[this.pos] ?? '';
  }

  skipSpace(): void {
    for (;;) {
      const c = this.text[this.pos];
      if (c === ' ' || c === '\t' || c === '\n' || c === '\r') {
        this.pos++;
        continue;
      }
      if (c === '#' || (c === '/' && this.text[this.pos + 1] === '/')) {
        while (this.pos < this.text.length && this.text[this.pos] !== '\n') this.pos++;
        continue;
      }
      if (c === '/' && this.text[this.pos + 1] === '*') {
        const end = this.text.indexOf('*/', this.pos + 2);
        this.pos = end < 0 ? this.text.length : end + 2;
        continue;
      }
      return;
    }
  }

  identifier(): string | undefined {
    IDENT.lastIndex = this.pos;
    const m = IDENT.exec(this.text);
    if (!m) return undefined;
    this.pos += m[0].length;
    return m[0];
  }

  /** Fails on whatever is at the current position, naming it. */
  unsupported(): never {
    this.skipSpace();
    const rest = this.text.slice(this.pos);
    const op = /^(==|!=|<=|>=|&&|\|\||[-+*/%<>!?:])/.exec(rest)?.[0];
    if (op === '?' || op === ':') throw new ExpressionError('conditional expressions (a ? b : c) are not supported');
    if (op)
      throw new ExpressionError(
        `operator "${op}" is not supported (kms-sync evaluates references, literals and a few functions only)`,
      );
    if (rest.startsWith('[*]') || rest.startsWith('.*'))
      throw new ExpressionError('splat expressions ([*]) are not supported');
    if (rest.startsWith('<<')) throw new ExpressionError('heredoc strings are not supported');
    if (rest === '') throw new ExpressionError('unterminated expression');
    throw new ExpressionError(`cannot read the expression at ${JSON.stringify(rest.slice(0, 20))}`);
  }

  expression(): Expr {
    this.skipSpace();
    const start = this.pos;
    const c = this.peekChar();
    let e: Expr;
    if (c === '"') e = this.quoted();
    else if (c === '[') e = this.list();
    else if (c === '{') e = this.object();
    else if (c === '(') {
      this.pos++;
      e = this.expression();
      this.skipSpace();
      if (this.peekChar() !== ')') this.unsupported();
      this.pos++;
    } else if (/[-\d]/.test(c)) {
      NUMBER.lastIndex = this.pos;
      const m = NUMBER.exec(this.text);
      if (!m) this.unsupported();
      this.pos += m[0].length;
      e = { k: 'lit', v: Number(m[0]) };
    } else {
      const name = this.identifier();
      if (!name) this.unsupported();
      if (name === 'true' || name === 'false') e = { k: 'lit', v: name === 'true' };
      else if (name === 'null') e = { k: 'lit', v: null };
      else if (this.text.startsWith('::', this.pos))
        throw new ExpressionError(`provider-defined functions (${name}::…) are not supported`);
      else if (this.peekAfterSpace() === '(') e = this.call(name, start);
      else e = this.traversal(name, start);
    }
    this.skipSpaceInline();
    const next = this.peekChar();
    const comment = next === '#' || this.text.startsWith('//', this.pos) || this.text.startsWith('/*', this.pos);
    // `=` alone follows an object key or starts the next tfvars attribute; anything else is an operator.
    if (next && '=!<>&|+-*/%?'.includes(next) && !comment && !(next === '=' && this.text[this.pos + 1] !== '='))
      this.unsupported();
    return e;
  }

  private skipSpaceInline(): void {
    while (this.text[this.pos] === ' ' || this.text[this.pos] === '\t') this.pos++;
  }

  private peekAfterSpace(): string {
    let p = this.pos;
    while (this.text[p] === ' ' || this.text[p] === '\t') p++;
    return this.text[p] ?? '';
  }

  private quoted(): Expr {
    this.pos++; // opening quote
    const parts: Array<string | Expr> = [];
    let lit = '';
    for (;;) {
      const c = this.text[this.pos];
      if (c === undefined) throw new ExpressionError('unterminated string');
      if (c === '"') {
        this.pos++;
        break;
      }
      if (c === '\\') {
        const n = this.text[this.pos + 1];
        const map: Record<string, string> = { n: '\n', t: '\t', r: '\r', '"': '"', '\\': '\\' };
        if (n !== undefined && n in map) {
          lit += map[n];
          this.pos += 2;
          continue;
        }
        if (n === 'u') {
          lit += String.fromCharCode(parseInt(this.text.slice(this.pos + 2, this.pos + 6), 16));
          this.pos += 6;
          continue;
        }
        throw new ExpressionError(`unknown escape \\${n ?? ''} in a string`);
      }
      if (this.text.startsWith('$${', this.pos)) {
        lit += '${';
        this.pos += 3;
        continue;
      }
      if (this.text.startsWith('%%{', this.pos)) {
        lit += '%{';
        this.pos += 3;
        continue;
      }
      if (this.text.startsWith('%{', this.pos))
        throw new ExpressionError('template directives (%{if}, %{for}) are not supported');
      if (this.text.startsWith('${', this.pos)) {
        if (lit) {
          parts.push(lit);
          lit = '';
        }
        this.pos += 2;
        parts.push(this.expression());
        this.skipSpace();
        if (this.peekChar() !== '}') this.unsupported();
        this.pos++;
        continue;
      }
      lit += c;
      this.pos++;
    }
    if (lit || parts.length === 0) parts.push(lit);
    if (parts.length === 1 && typeof parts[0] === 'string') return { k: 'lit', v: parts[0] };
    return { k: 'tpl', parts };
  }

  private list(): Expr {
    this.pos++;
    const items: Expr[] = [];
    for (;;) {
      this.skipSpace();
      if (this.peekChar() === ']') {
        this.pos++;
        return { k: 'list', items };
      }
      if (this.text.startsWith('for ', this.pos)) throw new ExpressionError('for expressions are not supported');
      items.push(this.expression());
      this.skipSpace();
      if (this.peekChar() === ',') {
        this.pos++;
        continue;
      }
      if (this.peekChar() !== ']') this.unsupported();
    }
  }

  private object(): Expr {
    this.pos++;
    const entries: Array<[Expr, Expr]> = [];
    for (;;) {
      this.skipSpace();
      if (this.peekChar() === '}') {
        this.pos++;
        return { k: 'obj', entries };
      }
      if (this.text.startsWith('for ', this.pos)) throw new ExpressionError('for expressions are not supported');
      let key: Expr;
      const save = this.pos;
      const name = this.identifier();
      this.skipSpace();
      if (name && (this.peekChar() === '=' || this.peekChar() === ':')) key = { k: 'lit', v: name };
      else {
        this.pos = save;
        key = this.expression();
        this.skipSpace();
      }
      if (this.peekChar() !== '=' && this.peekChar() !== ':') this.unsupported();
      this.pos++;
      entries.push([key, this.expression()]);
      this.skipSpace();
      if (this.peekChar() === ',') this.pos++;
    }
  }

  private call(name: string, start: number): Expr {
    this.skipSpaceInline();
    this.pos++; // (
    const args: Expr[] = [];
    for (;;) {
      this.skipSpace();
      if (this.peekChar() === ')') {
        this.pos++;
        break;
      }
      args.push(this.expression());
      this.skipSpace();
      if (this.text.startsWith('...', this.pos)) throw new ExpressionError('argument expansion (...) is not supported');
      if (this.peekChar() === ',') {
        this.pos++;
        continue;
      }
      if (this.peekChar() !== ')') this.unsupported();
    }
    return { k: 'call', name, args, text: this.text.slice(start, this.pos) };
  }

  private traversal(root: string, start: number): Expr {
    const parts: Array<string | number> = [root];
    for (;;) {
      if (this.text.startsWith('.*', this.pos) || this.text.startsWith('[*]', this.pos))
        throw new ExpressionError('splat expressions ([*]) are not supported');
      if (this.peekChar() === '.') {
        this.pos++;
        const n = /\d+/y;
        n.lastIndex = this.pos;
        const idx = n.exec(this.text);
        if (idx) {
          parts.push(Number(idx[0]));
          this.pos += idx[0].length;
          continue;
        }
        const name = this.identifier();
        if (!name) this.unsupported();
        parts.push(name);
        continue;
      }
      if (this.peekChar() === '[') {
        this.pos++;
        const e = this.expression();
        this.skipSpace();
        if (this.peekChar() !== ']') this.unsupported();
        this.pos++;
        if (e.k !== 'lit' || (typeof e.v !== 'string' && typeof e.v !== 'number')) {
          throw new ExpressionError(
            `index expressions other than literals are not supported in ${this.text.slice(start, this.pos)}`,
          );
        }
        parts.push(e.v);
        continue;
      }
      return { k: 'ref', parts, text: this.text.slice(start, this.pos) };
    }
  }
}

// ------------------------------------------------------------------------------------ evaluation

export interface EvalContext {
  /** Value of a reference such as `var.x` or `kms_client.a.name` (with any index parts). */
  resolve(ref: { parts: Array<string | number>; text: string }): JsonValue;
}

/** The functions kms-sync evaluates: pure, on known values, same results as Terraform's. */
export const SUPPORTED_FUNCTIONS = [
  'concat',
  'format',
  'join',
  'jsondecode',
  'jsonencode',
  'lower',
  'merge',
  'tobool',
  'tolist',
  'tonumber',
  'toset',
  'tostring',
  'trimspace',
  'upper',
] as const;

const isObject = (v: JsonValue): v is { [k: string]: JsonValue } =>
  typeof v === 'object' && v !== null && !Array.isArray(v);

function asString(v: JsonValue, what: string): string {
  if (typeof v === 'string') return v;
  if (typeof v === 'number' || typeof v === 'boolean') return String(v);
  throw new ExpressionError(
    `${what}: expected a string, got ${v === null ? 'null' : Array.isArray(v) ? 'a list' : 'an object'}`,
  );
}

function callFunction(name: string, args: JsonValue[], text: string): JsonValue {
  const arity = (n: number) => {
    if (args.length !== n) throw new ExpressionError(`${name}() takes ${n} argument(s), got ${args.length} in ${text}`);
  };
  switch (name) {
    case 'lower':
      arity(1);
      return asString(args[0]!, text).toLowerCase();
    case 'upper':
      arity(1);
      return asString(args[0]!, text).toUpperCase();
    case 'trimspace':
      arity(1);
      return asString(args[0]!, text).trim();
    case 'tostring':
      arity(1);
      return args[0] === null ? null : asString(args[0]!, text);
    case 'tonumber': {
      arity(1);
      const v = args[0]!;
      if (typeof v === 'number' || v === null) return v;
      if (typeof v === 'string' && v.trim() !== '' && Number.isFinite(Number(v))) return Number(v);
      throw new ExpressionError(`tonumber(): ${JSON.stringify(v)} is not a number`);
    }
    case 'tobool': {
      arity(1);
      const v = args[0]!;
      if (typeof v === 'boolean' || v === null) return v;
      if (v === 'true' || v === 'false') return v === 'true';
      throw new ExpressionError(`tobool(): ${JSON.stringify(v)} is not a boolean`);
    }
    case 'tolist':
    case 'toset': {
      arity(1);
      if (!Array.isArray(args[0])) throw new ExpressionError(`${name}(): expected a list in ${text}`);
      return name === 'toset' ? [...new Map(args[0].map((x) => [JSON.stringify(x), x])).values()] : args[0];
    }
    case 'concat':
      return args.flatMap((a) => {
        if (!Array.isArray(a)) throw new ExpressionError(`concat(): every argument must be a list in ${text}`);
        return a;
      });
    case 'merge': {
      const out: { [k: string]: JsonValue } = {};
      for (const a of args) {
        if (a === null) continue;
        if (!isObject(a)) throw new ExpressionError(`merge(): every argument must be an object in ${text}`);
        Object.assign(out, a);
      }
      return out;
    }
    case 'join': {
      arity(2);
      const sep = asString(args[0]!, text);
      if (!Array.isArray(args[1])) throw new ExpressionError(`join(): the second argument must be a list in ${text}`);
      return args[1].map((x) => asString(x, text)).join(sep);
    }
    case 'jsonencode':
      arity(1);
      return JSON.stringify(args[0]);
    case 'jsondecode': {
      arity(1);
      try {
        return JSON.parse(asString(args[0]!, text)) as JsonValue;
      } catch (e) {
        throw new ExpressionError(`jsondecode(): ${(e as Error).message}`);
      }
    }
    case 'format': {
      if (args.length === 0) throw new ExpressionError(`format() needs a format string in ${text}`);
      const [fmt, ...rest] = args;
      let n = 0;
      return asString(fmt!, text).replace(/%(.|$)/g, (_m, verb: string) => {
        if (verb === '%') return '%';
        if (!'sdv'.includes(verb) || verb === '')
          throw new ExpressionError(`format(): verb %${verb} is not supported (only %s, %d, %v, %%)`);
        if (n >= rest.length) throw new ExpressionError(`format(): not enough arguments in ${text}`);
        const v = rest[n++]!;
        if (verb === 'd') {
          if (typeof v !== 'number' || !Number.isInteger(v))
            throw new ExpressionError(`format(): %d needs a whole number in ${text}`);
          return String(v);
        }
        return asString(v, text);
      });
    }
    default:
      throw new ExpressionError(
        `function ${name}() is not supported: kms-sync evaluates ${SUPPORTED_FUNCTIONS.map((f) => `${f}()`).join(', ')}; compute the value in TypeScript instead`,
      );
  }
}

export function evaluate(e: Expr, ctx: EvalContext): JsonValue {
  switch (e.k) {
    case 'lit':
      return e.v;
    case 'ref':
      return ctx.resolve(e);
    case 'list':
      return e.items.map((x) => evaluate(x, ctx));
    case 'obj': {
      const out: { [k: string]: JsonValue } = {};
      for (const [k, v] of e.entries) out[asString(evaluate(k, ctx), 'object key')] = evaluate(v, ctx);
      return out;
    }
    case 'call':
      return callFunction(
        e.name,
        e.args.map((a) => evaluate(a, ctx)),
        e.text,
      );
    case 'tpl': {
      if (e.parts.length === 1 && typeof e.parts[0] !== 'string') return evaluate(e.parts[0]!, ctx);
      return e.parts
        .map((p) => {
          if (typeof p === 'string') return p;
          const v = evaluate(p, ctx);
          if (v === null) throw new ExpressionError('a null value cannot be part of a string');
          return asString(v, 'string template');
        })
        .join('');
    }
  }
}

/** Evaluates a JSON value of cdk.tf.json: every string in it is a template. */
export function evaluateJson(v: unknown, ctx: EvalContext): JsonValue {
  if (typeof v === 'string')
    return hasInterpolation(v) || v.includes('$${') || v.includes('%%{') ? evaluate(parseTemplate(v), ctx) : v;
  if (Array.isArray(v)) return v.map((x) => evaluateJson(x, ctx));
  if (v && typeof v === 'object') {
    const out: { [k: string]: JsonValue } = {};
    for (const [k, x] of Object.entries(v)) out[k] = evaluateJson(x, ctx);
    return out;
  }
  return v as JsonValue;
}
