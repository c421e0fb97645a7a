// JSON configurations (`.json`, e.g. generated ones): the same schema and the same diagnostics as
// YAML. A clean file goes through JSON.parse (fastParseJson), checked so that it cannot differ
// from the small reader of our own below; that reader runs for every other file and whenever a
// field has to be placed, because every error needs line:column and a field path, duplicate keys
// must be errors (JSON.parse keeps the last one silently), and it keeps the offsets of every key
// and value for the later checks' messages.
import type { PathSegment } from './diagnostics.js';
import type { InterpolationSite } from './fast-yaml.js';
import { PositionIndex } from './positions.js';

export interface JsonParse {
  value: unknown;
  index: PositionIndex;
  sites: InterpolationSite[];
  /** The first syntax error (JSON parsing stops there), with the path of the value being read. */
  error?: { offset: number; segments: PathSegment[]; message: string };
}

const MAX_DEPTH = 100;

class JsonSyntaxError extends Error {
  readonly offset: number;
  constructor(offset: number, message: string) {
    super(message);
    this.offset = offset;
  }
}

export function parseJson(text: string): JsonParse {
  const p = new JsonReader(text);
  try {
    p.ws();
    if (p.pos >= text.length)
      throw new JsonSyntaxError(
        p.pos,
        'JSON: the file has no value (an empty JSON configuration is not valid; write {"apiVersion": "kms-sync/v1"})',
      );
    const value = p.value(0);
    p.ws();
    if (p.pos < text.length)
      throw new JsonSyntaxError(p.pos, `JSON: unexpected ${describeChar(text, p.pos)} after the end of the document`);
    return { value, index: p.index, sites: p.sites };
  } catch (err) {
    if (!(err instanceof JsonSyntaxError)) throw err;
    return {
      value: undefined,
      index: p.index,
      sites: p.sites,
      error: { offset: err.offset, segments: [...p.path], message: err.message },
    };
  }
}

/**
 * The clean-file path: JSON.parse (native, several times faster than the reader below), accepted
 * only when it cannot differ from that reader: no duplicate key (JSON.parse keeps the last one
 * silently, so the keys it kept are counted against the key separators of the text) and no nesting
 * past MAX_DEPTH. Anything else (a syntax error included) returns undefined and the caller uses
 * parseJson, which gives the diagnostic. No offsets: the caller runs parseJson when a field has to
 * be placed. Sites carry no offset (-1).
 */
export function fastParseJson(text: string): { value: unknown; sites: InterpolationSite[] } | undefined {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    return undefined;
  }
  const sites: InterpolationSite[] = [];
  const path: PathSegment[] = [];
  let keys = 0;
  let tooDeep = false;
  type Container = Record<string, unknown> | unknown[];
  const walk = (node: Container, depth: number): void => {
    if (depth >= MAX_DEPTH) {
      tooDeep = true;
      return;
    }
    const visit = (v: unknown, key: string | number): void => {
      if (typeof v === 'string') {
        if (v.includes('${')) sites.push({ container: node, key, segments: [...path, key], offset: -1, plain: false });
      } else if (v !== null && typeof v === 'object') {
        path.push(key);
        walk(v as Container, depth + 1);
        path.pop();
      }
    };
    if (Array.isArray(node)) {
      for (let i = 0; i < node.length; i++) visit(node[i], i);
    } else {
      for (const key in node) {
        keys++;
        visit(node[key], key);
      }
    }
  };
  if (value !== null && typeof value === 'object') walk(value as Record<string, unknown>, 0);
  if (tooDeep || keys !== keySeparators(text)) return undefined;
  return { value, sites };
}

/** The ':' outside strings of a valid JSON text: one per key of every object. */
function keySeparators(text: string): number {
  let count = 0;
  let p = 0;
  // The first ':' at or after p (kept between strings, so the text is scanned once).
  let colon = text.indexOf(':');
  for (;;) {
    const quote = text.indexOf('"', p);
    const end = quote < 0 ? text.length : quote;
    while (colon >= 0 && colon < end) {
      count++;
      colon = text.indexOf(':', colon + 1);
    }
    if (quote < 0) return count;
    // The string's closing quote is the first one not escaped by an odd run of backslashes.
    let close = text.indexOf('"', quote + 1);
    for (;;) {
      let b = close - 1;
      while (text.charCodeAt(b) === 0x5c) b--;
      if ((close - 1 - b) % 2 === 0) break;
      close = text.indexOf('"', close + 1);
    }
    p = close + 1;
    if (colon >= 0 && colon < p) colon = text.indexOf(':', p);
  }
}

function describeChar(text: string, pos: number): string {
  if (pos >= text.length) return 'end of file';
  const ch = text.codePointAt(pos)!;
  return ch < 0x20 || (ch >= 0x7f && ch <= 0x9f)
    ? `control character U+${ch.toString(16).toUpperCase().padStart(4, '0')}`
    : `character ${JSON.stringify(String.fromCodePoint(ch))}`;
}

const ESC: Record<string, string> = { '"': '"', '\\': '\\', '/': '/', b: '\b', f: '\f', n: '\n', r: '\r', t: '\t' };
const NUMBER = /-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][-+]?[0-9]+)?/y;

class JsonReader {
  pos = 0;
  readonly index: PositionIndex;
  readonly sites: InterpolationSite[] = [];
  readonly path: PathSegment[] = [];
  private readonly text: string;

  constructor(text: string) {
    this.text = text;
    this.index = new PositionIndex(text);
  }

  ws(): void {
    const t = this.text;
    let p = this.pos;
    for (;;) {
      const c = t.charCodeAt(p);
      if (c === 0x20 || c === 0x0a || c === 0x0d || c === 0x09) p++;
      else break;
    }
    this.pos = p;
  }

  value(depth: number): unknown {
    if (depth > MAX_DEPTH) throw new JsonSyntaxError(this.pos, `JSON: nesting deeper than ${MAX_DEPTH} levels`);
    const t = this.text;
    const c = t.charCodeAt(this.pos);
    if (c === 0x7b) return this.object(depth);
    if (c === 0x5b) return this.array(depth);
    if (c === 0x22) return this.string();
    if (c === 0x2d || (c >= 0x30 && c <= 0x39)) {
      NUMBER.lastIndex = this.pos;
      const m = NUMBER.exec(t);
      if (!m) throw new JsonSyntaxError(this.pos, `JSON: malformed number`);
      this.pos += m[0].length;
      return Number(m[0]);
    }
    for (const [word, v] of [
      ['true', true],
      ['false', false],
      ['null', null],
    ] as const) {
      if (t.startsWith(word, this.pos)) {
        this.pos += word.length;
        return v;
      }
    }
    throw new JsonSyntaxError(this.pos, `JSON: unexpected ${describeChar(t, this.pos)} where a value should start`);
  }

  private object(depth: number): Record<string, unknown> {
    const t = this.text;
    const obj: Record<string, unknown> = {};
    const offsets: (string | number)[] = [];
    this.index.set(obj, offsets);
    this.pos++;
    this.ws();
    if (t.charCodeAt(this.pos) === 0x7d) {
      this.pos++;
      return obj;
    }
    for (;;) {
      if (t.charCodeAt(this.pos) !== 0x22)
        throw new JsonSyntaxError(
          this.pos,
          `JSON: expected a key in double quotes, found ${describeChar(t, this.pos)}`,
        );
      const keyOffset = this.pos;
      const key = this.rawString();
      if (Object.hasOwn(obj, key)) {
        this.path.push(key);
        const first = offsets[offsets.indexOf(key) + 1] as number;
        const at = this.index.position(first);
        throw new JsonSyntaxError(
          keyOffset,
          `duplicate key ${JSON.stringify(key)} in this object (first at line ${at.line}, column ${at.column})`,
        );
      }
      this.ws();
      if (t.charCodeAt(this.pos) !== 0x3a)
        throw new JsonSyntaxError(
          this.pos,
          `JSON: expected ':' after the key ${JSON.stringify(key)}, found ${describeChar(t, this.pos)}`,
        );
      this.pos++;
      this.ws();
      const valueOffset = this.pos;
      this.path.push(key);
      const v = this.value(depth + 1);
      this.path.pop();
      if (typeof v === 'string' && v.includes('${'))
        this.sites.push({ container: obj, key, segments: [...this.path, key], offset: valueOffset, plain: false });
      if (key === '__proto__')
        Object.defineProperty(obj, key, { value: v, enumerable: true, writable: true, configurable: true });
      else obj[key] = v;
      offsets.push(key, keyOffset, valueOffset);
      this.ws();
      const c = t.charCodeAt(this.pos);
      if (c === 0x2c) {
        this.pos++;
        this.ws();
        continue;
      }
      if (c === 0x7d) {
        this.pos++;
        return obj;
      }
      throw new JsonSyntaxError(
        this.pos,
        `JSON: expected ',' or '}' after the value of ${JSON.stringify(key)}, found ${describeChar(t, this.pos)}`,
      );
    }
  }

  private array(depth: number): unknown[] {
    const t = this.text;
    const items: unknown[] = [];
    const offsets: number[] = [];
    this.index.set(items, offsets);
    this.pos++;
    this.ws();
    if (t.charCodeAt(this.pos) === 0x5d) {
      this.pos++;
      return items;
    }
    for (;;) {
      const offset = this.pos;
      const i = items.length;
      this.path.push(i);
      const v = this.value(depth + 1);
      this.path.pop();
      if (typeof v === 'string' && v.includes('${'))
        this.sites.push({ container: items, key: i, segments: [...this.path, i], offset, plain: false });
      items.push(v);
      offsets.push(offset);
      this.ws();
      const c = t.charCodeAt(this.pos);
      if (c === 0x2c) {
        this.pos++;
        this.ws();
        continue;
      }
      if (c === 0x5d) {
        this.pos++;
        return items;
      }
      throw new JsonSyntaxError(
        this.pos,
        `JSON: expected ',' or ']' after item ${i}, found ${describeChar(t, this.pos)}`,
      );
    }
  }

  private string(): string {
    return this.rawString();
  }

  private rawString(): string {
    const t = this.text;
    let p = this.pos + 1;
    let out = '';
    let from = p;
    for (;;) {
      const c = t.charCodeAt(p);
      if (Number.isNaN(c)) throw new JsonSyntaxError(this.pos, 'JSON: string not closed before the end of the file');
      if (c === 0x22) break;
      if (c < 0x20)
        throw new JsonSyntaxError(p, `JSON: ${describeChar(t, p)} inside a string (write it as an escape such as \\n)`);
      if (c === 0x5c) {
        out += t.slice(from, p);
        const e = t[p + 1];
        if (e === 'u') {
          const hex = t.slice(p + 2, p + 6);
          if (!/^[0-9a-fA-F]{4}$/.test(hex))
            throw new JsonSyntaxError(p, 'JSON: malformed \\u escape (expected 4 hex digits)');
          out += String.fromCharCode(parseInt(hex, 16));
          p += 6;
        } else if (e !== undefined && ESC[e] !== undefined) {
          out += ESC[e];
          p += 2;
        } else {
          throw new JsonSyntaxError(p, `JSON: unknown escape \\${e ?? ''} in a string`);
        }
        from = p;
        continue;
      }
      p++;
    }
    out += t.slice(from, p);
    this.pos = p + 1;
    return out;
  }
}
