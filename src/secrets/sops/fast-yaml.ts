/**
 * The store file's usual text, read and written without the `yaml` package.
 *
 * Why: the `yaml` package builds a full document (nodes, ranges, comments) and took ~0.6 s to read
 * a store of 3,000 secrets, and its emitter and the read-back check of each emitted entry were
 * most of the time of a write (issue 16). The files this store writes (and SOPS's own) use a small
 * part of YAML: block mappings and lists, 4-space indentation, plain `ENC[...]` values, double
 * quoted strings, `null`, and the age stanzas as `|` block literals. This reader and this emitter
 * cover that part and nothing else: anything outside it (comments, tabs, non-ASCII text, escapes,
 * flow collections, anchors, other scalars, several documents) makes them return undefined, and
 * the caller uses the `yaml` package, which reads and writes any YAML. On the text they accept,
 * they must agree with the `yaml` package exactly (test/secrets/sops-fast-yaml.test.ts compares
 * trees and bytes), and the files stay SOPS files (test/secrets/interop.test.ts decrypts them with
 * independent tools).
 */
import type { SMap, SNode, SSeq, ScalarValue } from './tree.js';

/** A key written plain (the `yaml` package's rule for our keys: anything else is double-quoted). */
const SAFE_PLAIN_KEY = /^[A-Za-z_][A-Za-z0-9_.~%/-]*$/;
/** Words YAML 1.1 readers take for booleans or null: written quoted, as the `yaml` emitter does here. */
const YAML11_WORDS = /^(?:y|yes|n|no|true|false|on|off|null|~)$/i;
/** Plain words that the YAML 1.2 core schema reads as null or a boolean, not a string. */
const CORE_WORDS = /^(?:null|Null|NULL|true|True|TRUE|false|False|FALSE)$/;
/** Text that goes between double quotes as it is: printable ASCII without `"` and `\`. */
const QUOTABLE = /^[\x20\x21\x23-\x5b\x5d-\x7e]*$/;
/** An `ENC[...]` value as SOPS writes it: a plain scalar in any YAML reader. */
const ENC_PLAIN = /^ENC\[AES256_GCM,data:[A-Za-z0-9+/=]+,iv:[A-Za-z0-9+/=]+,tag:[A-Za-z0-9+/=]+,type:[a-z]+\]$/;
/**
 * Plain scalars this reader takes: no spaces (so no comments, no `: `), a first character that is
 * no YAML indicator. Those starting with a digit are taken only as integers or as version strings
 * (`3.10.2`); anything else that could be a number is left to the `yaml` package.
 */
const PLAIN_WORD = /^[A-Za-z_^$/][\x21\x24-\x26\x28-\x7e]*$/;
const DIGITS = /^[0-9]+$/;
const VERSION = /^[0-9]+(?:\.[0-9]+){2,}$/;
const BLOCK_LINE = /^[\x20-\x7e]+$/;

const map = (entries: [string, SNode][] = []): SMap => ({ kind: 'map', entries });
const scalar = (value: ScalarValue): SNode => ({ kind: 'scalar', value });

class Outside extends Error {}
const OUTSIDE = new Outside();
const bail = (): never => {
  throw OUTSIDE;
};

/**
 * Text of each entry of the top-level `secrets` mapping (from its key line to the next key line), by
 * node, with where it starts in the document (the text is ASCII here: a character offset is a byte offset).
 */
export type EntrySlices = [SNode, { name: string; text: string; start: number }][];

/**
 * The tree of `text` when it is in the subset above (undefined otherwise); with `slices`, the text
 * of each entry of a top-level `secrets` mapping whose keys are indented by 4.
 */
export function readStoreYaml(text: string, slices?: EntrySlices): SMap | undefined {
  if (text === '' || /[^\x20-\x7e\n]/.test(text)) return undefined;
  try {
    return new Reader(text, slices).document();
  } catch (err) {
    if (err instanceof Outside || err instanceof RangeError) return undefined;
    throw err;
  }
}

class Reader {
  private readonly lines: string[];
  private readonly starts: number[] = [];
  private li = 0;
  private readonly text: string;
  private readonly slices: EntrySlices | undefined;
  constructor(text: string, slices: EntrySlices | undefined) {
    this.text = text;
    this.slices = slices;
    const lines = text.split('\n');
    if (lines[lines.length - 1] === '') lines.pop();
    else bail(); // no final line break: not a file we write
    let at = 0;
    for (const l of lines) {
      if (l.trim() === '' || l.trimStart().startsWith('#')) bail(); // blank and comment lines: full parser
      this.starts.push(at);
      at += l.length + 1;
    }
    this.lines = lines;
  }

  document(): SMap {
    const first = this.lines[0]!;
    if (first.startsWith(' ') || first.startsWith('-') || first.startsWith('---') || first.startsWith('%')) bail();
    const root = this.map(0, true);
    if (this.li !== this.lines.length) bail();
    return root;
  }

  private indent(li: number): number {
    const l = this.lines[li];
    if (l === undefined) return -1;
    let i = 0;
    while (l.charCodeAt(i) === 0x20) i++;
    return i;
  }

  private isItem(li: number, col: number): boolean {
    const l = this.lines[li]!;
    return l.charCodeAt(col) === 0x2d && (l.length === col + 1 || l.charCodeAt(col + 1) === 0x20);
  }

  /** A block mapping whose keys are at `col`; the first key may sit after a `- ` (then `li` is that line and `from` the key's column). */
  private map(col: number, top = false, from = col): SMap {
    const out = map();
    const seen = new Set<string>();
    let keyCol = from;
    for (;;) {
      const li = this.li;
      const line = this.lines[li]!;
      const [key, rest] = this.keyAt(line, keyCol);
      if (seen.has(key)) bail();
      seen.add(key);
      let value: SNode;
      if (rest === '') {
        // A nested block: a mapping or a list, more indented (a list may not sit at the key's column here).
        this.li++;
        const next = this.indent(this.li);
        if (next <= col) bail(); // `key:` with nothing under it: an empty value, left to the full parser
        if (this.isItem(this.li, next)) value = this.seq(next);
        else {
          const startLi = this.li;
          value = this.map(next);
          if (top && key === 'secrets' && next === 4 && this.slices) this.recordSlices(value as SMap, startLi);
        }
      } else {
        value = this.inline(rest, col);
      }
      out.entries.push([key, value]);
      const next = this.indent(this.li);
      if (next < col || this.li >= this.lines.length) break;
      if (next > col || this.isItem(this.li, col)) bail();
      keyCol = col;
    }
    return out;
  }

  /** The entries of `secrets` (keys at column 4) start on line `startLi`: each one's text, by node. */
  private recordSlices(secrets: SMap, startLi: number): void {
    const keyLines: number[] = [];
    for (let li = startLi; li < this.li; li++) if (this.indent(li) === 4) keyLines.push(li);
    if (keyLines.length !== secrets.entries.length) return;
    const end = this.li < this.lines.length ? this.starts[this.li]! : this.text.length;
    keyLines.forEach((li, i) => {
      const to = i + 1 < keyLines.length ? this.starts[keyLines[i + 1]!]! : end;
      const [name, node] = secrets.entries[i]!;
      const start = this.starts[li]!;
      this.slices!.push([node, { name, text: this.text.slice(start, to), start }]);
    });
  }

  /** A key at `col` of `line`, followed by `:` and the end of the line or a space: the key and what follows `: `. */
  private keyAt(line: string, col: number): [string, string] {
    let key: string;
    let after: number;
    if (line.charCodeAt(col) === 0x22) {
      const close = line.indexOf('"', col + 1);
      if (close < 0) bail();
      key = line.slice(col + 1, close);
      if (key.includes('\\') || close - col + 1 > 1024) bail();
      after = close + 1;
      if (line.charCodeAt(after) !== 0x3a) bail();
    } else {
      after = line.indexOf(':', col);
      if (after < 0) bail();
      key = line.slice(col, after);
      if (!SAFE_PLAIN_KEY.test(key) || CORE_WORDS.test(key)) bail();
    }
    if (after + 1 === line.length) return [key, ''];
    if (line.charCodeAt(after + 1) !== 0x20) bail();
    const rest = line.slice(after + 2);
    if (rest === '' || rest.startsWith(' ')) bail();
    return [key, rest];
  }

  /** The value after `key: ` on the current line (a `|` block literal takes the lines under it); moves past it. */
  private inline(rest: string, col: number): SNode {
    this.li++;
    if (rest === '|') return scalar(this.blockLiteral(col));
    if (rest === '{}') return map();
    if (rest === '[]') return { kind: 'seq', items: [] };
    return scalar(scalarValue(rest));
  }

  /** A `|` block literal (clip: one final line break) under a key at `col`: lines more indented, none blank. */
  private blockLiteral(col: number): string {
    const indent = this.indent(this.li);
    if (indent <= col) bail();
    const out: string[] = [];
    while (this.li < this.lines.length && this.indent(this.li) >= indent) {
      const l = this.lines[this.li]!;
      if (!BLOCK_LINE.test(l)) bail();
      out.push(l.slice(indent));
      this.li++;
    }
    return `${out.join('\n')}\n`;
  }

  /** A block list whose `- ` are at `col`: scalars, or mappings that start on the dash's line. */
  private seq(col: number): SSeq {
    const items: SNode[] = [];
    for (;;) {
      const line = this.lines[this.li]!;
      if (line.length < col + 3) bail(); // `-` alone: a nested block, not ours
      const rest = line.slice(col + 2);
      if (rest.startsWith(' ') || rest.startsWith('-') || rest === '|') bail();
      const colon = rest.indexOf(': ');
      if (colon >= 0 || rest.endsWith(':')) items.push(this.map(col + 2, false, col + 2));
      else items.push(this.inline(rest, col));
      const next = this.indent(this.li);
      if (next < col || this.li >= this.lines.length) break;
      if (next > col || !this.isItem(this.li, col)) bail();
    }
    return { kind: 'seq', items };
  }
}

/** The value of a scalar written after `key: ` (or `- `), under the YAML 1.2 core schema, or bail. */
function scalarValue(s: string): ScalarValue {
  const c = s.charCodeAt(0);
  if (c === 0x22) {
    if (s.length < 2 || !s.endsWith('"')) bail();
    const inner = s.slice(1, -1);
    if (!QUOTABLE.test(inner)) bail();
    return inner;
  }
  if (c >= 0x30 && c <= 0x39) {
    if (DIGITS.test(s)) return Number(s);
    if (VERSION.test(s)) return s;
    return bail();
  }
  if (!PLAIN_WORD.test(s) || s.endsWith(':')) bail();
  if (s === 'null' || s === 'Null' || s === 'NULL') return null;
  if (s === 'true' || s === 'True' || s === 'TRUE') return true;
  if (s === 'false' || s === 'False' || s === 'FALSE') return false;
  return s;
}

// ------------------------------------------------------------------------------------ writing

export type Region = 'data' | 'sops';

/** A key as the store writes it (plain, or double-quoted), or undefined when it needs escapes. */
function keyText(k: string): string | undefined {
  if (k.length > 1000) return undefined; // long keys become explicit `? ` keys in the yaml package
  if (SAFE_PLAIN_KEY.test(k) && !YAML11_WORDS.test(k)) return k;
  return QUOTABLE.test(k) ? `"${k}"` : undefined;
}

/** A scalar as the store writes it in `region` under `key`, or undefined when only the `yaml` package should. */
function scalarText(v: ScalarValue, region: Region, key: string | undefined): string | undefined {
  if (v === null) return 'null';
  if (typeof v === 'boolean') return v ? 'true' : 'false';
  if (typeof v === 'number') return Number.isSafeInteger(v) && v >= 0 ? String(v) : undefined;
  if (ENC_PLAIN.test(v)) return v;
  if (region === 'data' || key === 'lastmodified' || v === '') return QUOTABLE.test(v) ? `"${v}"` : undefined;
  // The sops region writes other strings plain where they read back as the same string.
  if (c0IsDigit(v)) return VERSION.test(v) ? v : undefined;
  return PLAIN_WORD.test(v) && !v.endsWith(':') && !CORE_WORDS.test(v) && !YAML11_WORDS.test(v) && !v.includes('#')
    ? v
    : undefined;
}

const c0IsDigit = (s: string) => s.charCodeAt(0) >= 0x30 && s.charCodeAt(0) <= 0x39;

/**
 * The text of `key: node` in a block mapping whose keys are at column `col` (each line ends with a
 * line break), as the `yaml` package writes it with the store's options; undefined outside the subset.
 */
export function emitPair(key: string, node: SNode, region: Region, col: number): string | undefined {
  const out: string[] = [];
  return pair(out, key, node, region, ' '.repeat(col), col) ? out.join('') : undefined;
}

function pair(out: string[], key: string, node: SNode, region: Region, lead: string, col: number): boolean {
  const k = keyText(key);
  if (k === undefined) return false;
  return value(out, `${lead}${k}:`, node, region, key, col);
}

/** `head` is the line so far (`    key:` or `- key:`); `col` is the column of the mapping holding the key. */
function value(out: string[], head: string, node: SNode, region: Region, key: string, col: number): boolean {
  if (node.kind === 'map') {
    if (node.entries.length === 0) {
      out.push(`${head} {}\n`);
      return true;
    }
    out.push(`${head}\n`);
    const inner = ' '.repeat(col + 4);
    for (const [k, v] of node.entries) if (!pair(out, k, v, region, inner, col + 4)) return false;
    return true;
  }
  if (node.kind === 'seq') {
    if (node.items.length === 0) {
      out.push(`${head} []\n`);
      return true;
    }
    out.push(`${head}\n`);
    const dash = `${' '.repeat(col + 4)}- `;
    for (const item of node.items) {
      if (item.kind === 'map' && item.entries.length > 0) {
        // `- k: v` with the mapping's other keys under `k`, at the dash's column + 2.
        const [first, ...others] = item.entries;
        if (!pair(out, first![0], first![1], region, dash, col + 6)) return false;
        const inner = ' '.repeat(col + 6);
        for (const [k, v] of others) if (!pair(out, k, v, region, inner, col + 6)) return false;
      } else if (item.kind === 'scalar' && !(typeof item.value === 'string' && item.value.includes('\n'))) {
        const t = scalarText(item.value, region, key);
        if (t === undefined) return false;
        out.push(`${dash}${t}\n`);
      } else return false;
    }
    return true;
  }
  const v = node.value;
  if (typeof v === 'string' && v.includes('\n')) {
    // A `|` block literal, content indented 4 past the key: only text ending in one line break, no blank or indented first line.
    if (!v.endsWith('\n') || v.endsWith('\n\n') || v.startsWith(' ')) return false;
    const lines = v.slice(0, -1).split('\n');
    if (!lines.every((l) => BLOCK_LINE.test(l))) return false;
    const pad = ' '.repeat(col + 4);
    out.push(`${head} |\n`);
    for (const l of lines) out.push(`${pad}${l}\n`);
    return true;
  }
  const t = scalarText(v, region, key);
  if (t === undefined) return false;
  out.push(`${head} ${t}\n`);
  return true;
}
