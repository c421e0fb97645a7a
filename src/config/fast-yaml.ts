// A fast path for the YAML that configurations are made of: block mappings and lists, plain and
// single-line quoted scalars, one-line flow collections (`[a, b]`, `{ k: v }`), comments.
//
// Why: the `yaml` package builds a full document (nodes, ranges, comments) and takes 3-5 s for the
// 4 MB file of 10,000 clients; js-yaml 5 takes ~0.5 s. This line-oriented reader builds plain
// values (and, when asked, the offsets of every key and item) in ~0.1 s. It never reports an error: anything
// outside that subset (anchors, tags, block scalars, multi-line scalars or flows, several
// documents, duplicate keys, tabs, unusual characters, anything malformed) returns undefined and
// the file goes through the `yaml` package, which gives the diagnostics. So the two paths can only
// differ on input this reader accepts, and there they must give the same values as the `yaml`
// package's core schema (test/config/fast-yaml.test.ts compares them, as does the config fuzz test).
import type { PathSegment } from './diagnostics.js';
import { PositionIndex, type ContainerOffsets } from './positions.js';

/** A string value that contains `${`: interpolated after parsing (values only, never keys). */
export interface InterpolationSite {
  container: Record<string, unknown> | unknown[];
  key: string | number;
  segments: PathSegment[];
  offset: number;
  /** Plain (unquoted) scalar: a value that is exactly one reference is typed like YAML would. */
  plain: boolean;
}

export interface FastParse {
  /** The document (null for an empty one). */
  value: unknown;
  /** Offsets of every key and item when asked for (`positions`); line starts in any case. */
  index: PositionIndex;
  sites: InterpolationSite[];
  /** With `deferBodies`: the environments' clients and endpoints left unread, in document order. */
  deferred: DeferredBlock[];
  /** With `deferBodies`: the text's lines, to read the deferred blocks without scanning them again (fastParseBlockChunks). */
  lines?: LineTable;
}

/**
 * An environment's `clients` or `endpoints` block skipped by a skeleton read (fastParseYaml's
 * `deferBodies`): the mapping holds `[]` for it until fastParseBlockChunks reads its text.
 */
export interface DeferredBlock {
  /** The environment's mapping, at projects[project].environments[environment]. */
  container: Record<string, unknown>;
  key: 'clients' | 'endpoints';
  project: number;
  environment: number;
  /** The block's text: from the start of its first line to the start of the next line outside it. */
  start: number;
  end: number;
  /** The same, as lines of the text: [firstLine, endLine). */
  firstLine: number;
  endLine: number;
  /** Nesting depth of the block in the document (the depth limit holds as in a whole read). */
  depth: number;
}

class OutsideSubset extends Error {}
const bail = (): never => {
  throw new OutsideSubset();
};

/**
 * Characters the reader leaves to the full parser wherever they appear, and a CR that does not
 * end a line. Two tests, not one alternation: a single character class scans the text much faster.
 */
const UNUSUAL = /[\t\u0000-\u0008\u000b\u000c\u000e-\u001f\u007f-\u009f\u2028\u2029\ufeff\ufffe\uffff]/;
const LONE_CR = /\r(?!\n)/;
const MAX_DEPTH = 64;

const NULL_RE = /^(?:~|[Nn]ull|NULL)?$/;
const BOOL_RE = /^(?:[Tt]rue|TRUE|[Ff]alse|FALSE)$/;
const INT_RE = /^[-+]?[0-9]+$/;
const OCT_RE = /^0o[0-7]+$/;
const HEX_RE = /^0x[0-9a-fA-F]+$/;
const SPECIAL_FLOAT_RE = /^(?:[-+]?\.(?:inf|Inf|INF)|\.nan|\.NaN|\.NAN)$/;
const EXP_RE = /^[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)[eE][-+]?[0-9]+$/;
const FLOAT_RE = /^[-+]?(?:\.[0-9]+|[0-9]+\.[0-9]*)$/;

/** A plain scalar's value under the YAML 1.2 core schema (the `yaml` package's default). */
export function plainScalar(s: string): unknown {
  const c = s.charCodeAt(0);
  // Fast exit: most plain scalars are names. One starting with a letter is a string unless it is
  // null/true/false (4 or 5 letters, starting with n, t or f).
  if (s.length > 0 && ((c >= 0x61 && c <= 0x7a) || (c >= 0x41 && c <= 0x5a))) {
    const l = c | 0x20;
    if ((l !== 0x6e && l !== 0x74 && l !== 0x66) || s.length < 4 || s.length > 5) return s;
    switch (s) {
      case 'null':
      case 'Null':
      case 'NULL':
        return null;
      case 'true':
      case 'True':
      case 'TRUE':
        return true;
      case 'false':
      case 'False':
      case 'FALSE':
        return false;
      default:
        return s;
    }
  }
  // Any other core-schema value starts with a digit, a sign, a dot or `~` (or is empty).
  if (s.length > 0 && !((c >= 0x30 && c <= 0x39) || c === 0x2b || c === 0x2d || c === 0x2e || c === 0x7e)) return s;
  if (NULL_RE.test(s)) return null;
  if (BOOL_RE.test(s)) return s[0] === 't' || s[0] === 'T';
  if (OCT_RE.test(s)) return parseInt(s.slice(2), 8);
  if (INT_RE.test(s)) return parseInt(s, 10);
  if (HEX_RE.test(s)) return parseInt(s.slice(2), 16);
  if (SPECIAL_FLOAT_RE.test(s))
    return s.endsWith('nan') || s.endsWith('NaN') || s.endsWith('NAN') ? NaN : s[0] === '-' ? -Infinity : Infinity;
  if (EXP_RE.test(s) || FLOAT_RE.test(s)) return parseFloat(s);
  return s;
}

/**
 * Parses `text`, or returns undefined when it is not in the subset this reader handles. Without
 * `positions` the offsets of keys and items are not recorded: a clean load never places a field, so
 * the caller parses again with them only when a problem has to be placed (a quarter of the parse,
 * and most of its garbage, is that index).
 */
export function fastParseYaml(
  text: string,
  positions = true,
  deferBodies = false,
  lines?: LineTable,
): FastParse | undefined {
  // A skeleton read (deferBodies) checks the characters of what it read, after reading it: each
  // deferred block is checked when it is read (fastParseBlockChunks), on whichever thread reads
  // it, instead of the whole text on this one before anything (1,000,000 clients: ~0.3 s).
  if (!deferBodies && unusual(text)) return undefined;
  try {
    const read = new Reader(text, positions, deferBodies, 0, lines).document();
    return deferBodies && unusualOutside(text, read.deferred) ? undefined : read;
  } catch (err) {
    if (err instanceof OutsideSubset || err instanceof RangeError) return undefined;
    throw err;
  }
}

/** Whether `text` holds a character the reader leaves to the full parser (UNUSUAL, LONE_CR). */
function unusual(text: string): boolean {
  return UNUSUAL.test(text) || (text.includes('\r') && LONE_CR.test(text));
}

/**
 * unusual() of the text outside the `deferred` blocks (in document order). Each block starts at a
 * line's start and ends at one (or at the text's end), so no CR of one piece ends a line in the
 * next: the pieces together say what unusual() of the whole says.
 */
function unusualOutside(text: string, deferred: readonly DeferredBlock[]): boolean {
  let from = 0;
  for (const block of deferred) {
    if (unusual(text.slice(from, block.start))) return true;
    from = block.end;
  }
  return unusual(text.slice(from));
}

/**
 * The items of a deferred block (DeferredBlock) read `size` at a time, for a load that builds and
 * lets go of each chunk before reading the next: the parsed tree of a large environment then never
 * exists whole (100,000 clients' tree outlived V8's young generation and was collected, at a cost,
 * from the old one). Each chunk comes with its interpolation sites (their offsets are the block's). Throws
 * BlockOutsideSubset for a block outside the subset: the whole file then goes through the `yaml`
 * package, as fastParseYaml would have sent it. `lines`: the text's lines from line `lineBase` on
 * (a skeleton read's, whole or in part), read instead of scanning the block's lines again.
 */
export function* fastParseBlockChunks(
  text: string,
  block: DeferredBlock,
  size: number,
  lines?: LineTable,
  lineBase = 0,
): Generator<{ items: unknown[]; sites: InterpolationSite[] }, void, void> {
  const own = text.slice(block.start, block.end);
  // Its characters, which the skeleton read left unchecked (fastParseYaml).
  if (unusual(own)) throw new BlockOutsideSubset();
  const reader = lines
    ? new Reader(text, false, false, block.depth, lines, block.firstLine - lineBase, block.endLine - lineBase)
    : new Reader(own, false, false, block.depth);
  try {
    if (!reader.startChunks()) return;
  } catch (err) {
    throw err instanceof OutsideSubset || err instanceof RangeError ? new BlockOutsideSubset() : err;
  }
  for (;;) {
    let items: unknown[];
    try {
      items = reader.nextChunk(size);
    } catch (err) {
      throw err instanceof OutsideSubset || err instanceof RangeError ? new BlockOutsideSubset() : err;
    }
    if (items.length === 0) return;
    yield { items, sites: reader.takeSites() };
  }
}

/** A deferred block that only the whole file's read can read (fastParseBlockChunks). */
export class BlockOutsideSubset extends Error {
  constructor() {
    super('a block is outside the fast YAML subset');
  }
}

const SPACE = 0x20;

/** Slots of Reader.knownKeys (a power of two). */
const KNOWN_KEY_SLOTS = 256;
/** Slots of Reader.knownValues (a power of two). */
const KNOWN_VALUE_SLOTS = 512;
const HASH = 0x23;
const COLON = 0x3a;
const DASH = 0x2d;

/** A text's lines: where each starts and ends, and the column of its content (-1: blank or comment only). */
export interface LineTable {
  starts: Int32Array;
  ends: Int32Array;
  indents: Int32Array;
  count: number;
}

/** The lines of `text` (a skeleton read's: fastParseYaml's `lines` takes one built already). */
export function lineTable(text: string): LineTable {
  const n = text.length;
  let count = 1;
  for (let i = text.indexOf('\n'); i >= 0; i = text.indexOf('\n', i + 1)) count++;
  const starts = new Int32Array(count);
  const ends = new Int32Array(count);
  const indents = new Int32Array(count);
  let start = 0;
  for (let li = 0; li < count; li++) {
    let end = text.indexOf('\n', start);
    const next = end < 0 ? n + 1 : end + 1;
    if (end < 0) end = n;
    if (end > start && text.charCodeAt(end - 1) === 0x0d) end--;
    starts[li] = start;
    ends[li] = end;
    let p = start;
    while (p < end && text.charCodeAt(p) === SPACE) p++;
    indents[li] = p < end && text.charCodeAt(p) !== HASH ? p - start : -1;
    start = next;
  }
  return { starts, ends, indents, count };
}

const NEWLINE = 0x0a;
const RETURN = 0x0d;

/**
 * lineTable of an ASCII file built from its bytes as they are read (config/paths.ts readBounded):
 * `scan` takes the lines ended below `upTo` each time more bytes arrived, while the next read is
 * under way, and `finish` the last line. A byte is a character (ASCII), so the table is the one
 * lineTable makes of the text; built during the read, it takes the scan of the text (~0.74 s of
 * the 1,000,000-client plan's serial start) off the time the thread waits for nothing else.
 */
export class LineScanner {
  private starts: Int32Array;
  private ends: Int32Array;
  private indents: Int32Array;
  private count = 0;
  /** Where the first line not yet in the table starts. */
  private start = 0;

  /** `bytes`: the file's size (the room is guessed from it, and grows if the lines are shorter). */
  constructor(bytes: number) {
    const room = Math.ceil(bytes / 24) + 1024;
    this.starts = new Int32Array(room);
    this.ends = new Int32Array(room);
    this.indents = new Int32Array(room);
  }

  private grow(): void {
    const room = Math.ceil(this.starts.length * 1.5) + 1024;
    const more = (a: Int32Array) => {
      const b = new Int32Array(room);
      b.set(a);
      return b;
    };
    this.starts = more(this.starts);
    this.ends = more(this.ends);
    this.indents = more(this.indents);
  }

  /** The lines of `bytes` (a whole file's, read up to `upTo`) that end below `upTo`. */
  scan(bytes: Uint8Array, upTo: number): void {
    let start = this.start;
    for (;;) {
      let p = start;
      while (p < upTo && bytes[p] === SPACE) p++;
      let q = p;
      while (q < upTo && bytes[q] !== NEWLINE) q++;
      if (q >= upTo) break;
      this.line(bytes, start, p, q);
      start = q + 1;
    }
    this.start = start;
  }

  /** The table, once `bytes` were read to their end `n` (the last line has no newline). */
  finish(bytes: Uint8Array, n: number): LineTable {
    let p = this.start;
    while (p < n && bytes[p] === SPACE) p++;
    this.line(bytes, this.start, p, n);
    const count = this.count;
    return {
      starts: this.starts.subarray(0, count),
      ends: this.ends.subarray(0, count),
      indents: this.indents.subarray(0, count),
      count,
    };
  }

  /** A line from `start` to `end` (its newline or the end of the bytes); `p`: its first byte that is not a space. */
  private line(bytes: Uint8Array, start: number, p: number, end: number): void {
    if (end > start && bytes[end - 1] === RETURN) end--;
    if (this.count === this.starts.length) this.grow();
    const li = this.count++;
    this.starts[li] = start;
    this.ends[li] = end;
    this.indents[li] = p < end && bytes[p] !== HASH ? p - start : -1;
  }
}

class Reader {
  private readonly starts: Int32Array;
  private readonly ends: Int32Array;
  /** Column of each line's first non-space character; -1 for a blank or comment-only line. */
  private readonly indents: Int32Array;
  /** The end of the lines read (exclusive), and the first. */
  private readonly lineCount: number;
  private readonly firstLine: number;
  private readonly lines: LineTable;
  /** Index of the current content line (blank and comment-only lines are skipped). */
  private li: number;
  private readonly index: PositionIndex;
  private readonly positions: boolean;
  private readonly sites: InterpolationSite[] = [];
  private readonly path: PathSegment[] = [];
  private depth: number;
  private readonly deferBodies: boolean;
  private readonly deferred: DeferredBlock[] = [];

  private readonly text: string;

  /** The key just read by key(): its text and the offset after its ':' (fields, not an object per key). */
  private keyText = '';
  private keyAfter = 0;
  /**
   * Plain keys already read, by first character and length: a configuration repeats a handful of
   * keys (`name`, `template`, `keys`…) hundreds of thousands of times. A key whose text matches one
   * is that string again: no slice, no checks, and the same (internalized) property name for the
   * objects built, instead of a new string to hash into one each time.
   */
  private readonly knownKeys: (string | undefined)[] = new Array(KNOWN_KEY_SLOTS);
  /** Plain values already read, by first and last character and length (see plainText). */
  private readonly knownValues: (string | undefined)[] = new Array(KNOWN_VALUE_SLOTS);

  /**
   * `lines` (a skeleton read's, shared: LineTable) and a range of them [first, end) read a part of
   * `text` without scanning its lines again; by default, all of `text`'s lines.
   */
  constructor(
    text: string,
    positions: boolean,
    deferBodies = false,
    depth = 0,
    lines: LineTable = lineTable(text),
    first = 0,
    end = lines.count,
  ) {
    this.text = text;
    this.positions = positions;
    this.deferBodies = deferBodies;
    this.depth = depth;
    this.index = new PositionIndex(text);
    this.lines = lines;
    this.starts = lines.starts;
    this.ends = lines.ends;
    this.indents = lines.indents;
    this.li = first;
    this.firstLine = first;
    this.lineCount = end;
  }

  document(): FastParse {
    this.skipBlank(0, true);
    if (this.li < this.lineCount) {
      const s = this.starts[this.li]!;
      const line = this.text.slice(s, this.ends[this.li]);
      if (line.startsWith('%')) bail();
      if (/^---( *| +#.*)$/.test(line)) {
        this.li++;
        this.skipBlank(this.li);
      } else if (/^(---|\.\.\.)(\s|$)/.test(line)) bail();
    }
    if (this.li >= this.lineCount) return this.parsed(null);
    const indent = this.indentOf(this.li);
    this.index.rootOffset = this.starts[this.li]! + indent;
    const value = this.block(indent);
    if (this.li < this.lineCount) bail(); // content left over: a second document, or an error
    return this.parsed(value);
  }

  private parsed(value: unknown): FastParse {
    const out: FastParse = { value, index: this.index, sites: this.sites, deferred: this.deferred };
    if (this.deferBodies) out.lines = this.lines;
    return out;
  }

  // ------------------------------------------------------------------------------------ lines

  /** Moves to the first line at or after `from` that has content. */
  private skipBlank(from: number, atStart = false): void {
    let i = from;
    const t = this.text;
    const indents = this.indents;
    while (i < this.lineCount && indents[i]! < 0) i++;
    if (i < this.lineCount && !atStart && indents[i] === 0) {
      // document markers at column 0 are not content this reader handles
      const p = this.starts[i]!;
      const c = t.charCodeAt(p);
      if ((c === DASH || c === 0x2e) && /^(---|\.\.\.)(\s|$)/.test(t.slice(p, p + 4))) bail();
    }
    this.li = i;
  }

  private indentOf(li: number): number {
    return this.indents[li]!;
  }

  /** Column of the current line's content, or -1 at the end of the text. */
  private currentIndent(): number {
    return this.li < this.lineCount ? this.indentOf(this.li) : -1;
  }

  private isDashAt(li: number, col: number): boolean {
    const p = this.starts[li]! + col;
    if (this.text.charCodeAt(p) !== DASH) return false;
    return p + 1 >= this.ends[li]! || this.text.charCodeAt(p + 1) === SPACE;
  }

  /** After a value that ended its line: the rest of the line must be blank or a comment. */
  private endOfLine(p: number): void {
    const e = this.ends[this.li]!;
    const t = this.text;
    let q = p;
    while (q < e && t.charCodeAt(q) === SPACE) q++;
    if (q < e && !(t.charCodeAt(q) === HASH && q > p)) bail();
    this.skipBlank(this.li + 1);
  }

  /** The offsets list of a new container, registered in the index; none without positions. */
  private offsetsOf(container: object): ContainerOffsets | undefined {
    if (!this.positions) return undefined;
    const offsets: ContainerOffsets = [];
    this.index.set(container, offsets);
    return offsets;
  }

  // ------------------------------------------------------------------------------------ blocks

  /** The block node whose content starts at column `col` of the current line. */
  private block(col: number): unknown {
    if (++this.depth > MAX_DEPTH) bail();
    try {
      return this.isDashAt(this.li, col) ? this.seq(col) : this.map(col);
    } finally {
      this.depth--;
    }
  }

  private seq(col: number): unknown[] {
    const items: unknown[] = [];
    const offsets = this.offsetsOf(items);
    while (this.seqItem(col, items, offsets));
    return items;
  }

  /** The list item at the current line (its dash at column `col`) into `items`; whether another item of the list follows. */
  private seqItem(col: number, items: unknown[], offsets: ContainerOffsets | undefined): boolean {
    const s = this.starts[this.li]!;
    const dash = s + col;
    let q = dash + 1;
    const e = this.ends[this.li]!;
    while (q < e && this.text.charCodeAt(q) === SPACE) q++;
    this.path.push(items.length);
    let value: unknown;
    let offset: number;
    if (q >= e || this.text.charCodeAt(q) === HASH) {
      if (q < e && q === dash + 1) bail(); // "-#" is not a comment
      this.skipBlank(this.li + 1);
      const next = this.currentIndent();
      if (next > col) {
        offset = this.starts[this.li]! + next;
        value = this.block(next);
      } else {
        offset = dash;
        value = null;
      }
    } else {
      offset = q;
      value = this.inline(q, col, items, items.length, true);
    }
    this.path.pop();
    items.push(value);
    offsets?.push(offset);
    const next = this.currentIndent();
    if (next < col) return false;
    if (next > col) bail();
    return this.isDashAt(this.li, col); // else the parent mapping continues (an indentless list)
  }

  /** Column of the block list a chunked read goes through (startChunks); -1 once it is read to its end. */
  private chunkCol = -1;

  /**
   * Begins reading the text as one block list, chunk by chunk (nextChunk): document() for a text
   * whose value is a list, without building that list. False for a text without content.
   */
  startChunks(): boolean {
    this.skipBlank(this.firstLine, true);
    if (this.li >= this.lineCount) return false;
    const first = this.text.charCodeAt(this.starts[this.li]!);
    if (first === 0x25 || first === DASH || first === 0x2e) bail(); // a directive or document marker: document() decides
    const col = this.indentOf(this.li);
    this.index.rootOffset = this.starts[this.li]! + col;
    // block(): the list's own level of nesting, and only a list (a deferred block is one).
    if (++this.depth > MAX_DEPTH || !this.isDashAt(this.li, col)) bail();
    this.chunkCol = col;
    return true;
  }

  /** The next items (at most `n`) of the list startChunks began; none at its end. */
  nextChunk(n: number): unknown[] {
    const items: unknown[] = [];
    while (this.chunkCol >= 0 && items.length < n) {
      if (this.seqItem(this.chunkCol, items, undefined)) continue;
      this.chunkCol = -1;
      if (this.li < this.lineCount) bail(); // content left over: an error the whole read reports
    }
    return items;
  }

  /** The interpolation sites found since the last call (their containers are the chunks' items). */
  takeSites(): InterpolationSite[] {
    return this.sites.splice(0);
  }

  private map(col: number): Record<string, unknown> {
    const obj: Record<string, unknown> = {};
    const offsets = this.offsetsOf(obj);
    let first = true;
    for (;;) {
      const s = this.starts[this.li]!;
      const e = this.ends[this.li]!;
      const keyStart = s + col;
      if (!first && this.indentOf(this.li) !== col) bail();
      first = false;
      this.key(keyStart, e);
      const key = this.keyText;
      const after = this.keyAfter;
      if (Object.hasOwn(obj, key) || key === '__proto__') bail();
      let q = after;
      while (q < e && this.text.charCodeAt(q) === SPACE) q++;
      this.path.push(key);
      let value: unknown;
      let valueOffset: number;
      if (q >= e || (this.text.charCodeAt(q) === HASH && q > after)) {
        this.skipBlank(this.li + 1);
        const next = this.currentIndent();
        const body = this.deferBodies ? this.bodyKey(key) : undefined;
        if (body !== undefined && (next > col || (next === col && this.isDashAt(this.li, col)))) {
          valueOffset = this.starts[this.li]! + next;
          value = this.skipBody(obj, body, col);
        } else if (next > col) {
          valueOffset = this.starts[this.li]! + next;
          value = this.block(next);
        } else if (next === col && this.isDashAt(this.li, col)) {
          valueOffset = this.starts[this.li]! + col;
          if (++this.depth > MAX_DEPTH) bail();
          value = this.seq(col);
          this.depth--;
        } else {
          valueOffset = keyStart;
          value = null;
        }
      } else {
        valueOffset = q;
        value = this.inline(q, col, obj, key, false);
      }
      this.path.pop();
      obj[key] = value;
      offsets?.push(key, keyStart, valueOffset);
      const next = this.currentIndent();
      if (next < col) break;
      if (next > col || this.isDashAt(this.li, col)) bail();
    }
    return obj;
  }

  /** `clients` or `endpoints` of an environment (projects[i].environments[j]), which a skeleton read defers. */
  private bodyKey(key: string): 'clients' | 'endpoints' | undefined {
    const path = this.path;
    if (path.length !== 5 || path[0] !== 'projects' || path[2] !== 'environments') return undefined;
    return key === 'clients' || key === 'endpoints' ? key : undefined;
  }

  /**
   * Skips the block value of `key` (its lines: deeper than the key's column, or its indentless list's
   * items at that column), recording where it is; the mapping holds an empty list meanwhile.
   */
  private skipBody(obj: Record<string, unknown>, key: 'clients' | 'endpoints', col: number): unknown[] {
    const path = this.path;
    const first = this.li;
    const start = this.starts[first]!;
    const indentless = this.indentOf(this.li) === col;
    let li = this.li;
    for (; li < this.lineCount; li++) {
      const indent = this.indents[li]!;
      if (indent < 0 || indent > col) continue;
      if (indent === col && indentless && this.isDashAt(li, col)) continue;
      break;
    }
    const end = li < this.lineCount ? this.starts[li]! : this.text.length;
    this.skipBlank(li);
    this.deferred.push({
      container: obj,
      key,
      project: path[1] as number,
      environment: path[3] as number,
      start,
      end,
      firstLine: first,
      endLine: li,
      depth: this.depth,
    });
    return [];
  }

  /** A mapping key at `p`: plain or quoted, followed by ':' and a space or the end of the line. */
  private key(p: number, e: number): void {
    const t = this.text;
    const c = t.charCodeAt(p);
    if (c === 0x22 || c === 0x27) {
      const q = this.quoted(p, e);
      if (q.end - p > 1024) bail();
      if (t.charCodeAt(q.end) !== COLON || (q.end + 1 < e && t.charCodeAt(q.end + 1) !== SPACE)) bail();
      this.keyText = q.value;
      this.keyAfter = q.end + 1;
      return;
    }
    if (!plainStart(t, p, e, false)) bail();
    let q = p;
    for (;;) {
      while (q < e && t.charCodeAt(q) !== COLON) q++;
      if (q >= e) bail();
      if (q + 1 >= e || t.charCodeAt(q + 1) === SPACE) break;
      q++;
    }
    const slot = (c * 31 + (q - p)) & (KNOWN_KEY_SLOTS - 1);
    const known = this.knownKeys[slot];
    if (known !== undefined && known.length === q - p && t.startsWith(known, p)) {
      this.keyText = known;
      this.keyAfter = q + 1;
      return;
    }
    if (q - p > 1024) bail(); // YAML limits implicit keys to 1024 characters
    const raw = t.slice(p, q);
    if (raw.includes(' #')) bail();
    const key = raw.trimEnd();
    // Keys the core schema reads as another type (null, true, 1.0, 0x1F) would be renamed: full parser.
    if (plainScalar(key) !== key && !/^(0|[1-9][0-9]*)$/.test(key)) bail();
    if (key === raw && key.length <= 64) this.knownKeys[slot] = key;
    this.keyText = key;
    this.keyAfter = q + 1;
  }

  /** A value that starts at `p` on the current line (and, except for a compact mapping, ends there). */
  private inline(
    p: number,
    col: number,
    container: Record<string, unknown> | unknown[],
    key: string | number,
    inSeq: boolean,
  ): unknown {
    const t = this.text;
    const e = this.ends[this.li]!;
    const c = t.charCodeAt(p);
    let value: unknown;
    let end: number;
    if (c === 0x5b || c === 0x7b) {
      const r = this.flow(p, e, 0);
      value = r.value;
      end = r.end;
    } else if (c === 0x22 || c === 0x27) {
      const q = this.quoted(p, e);
      value = q.value;
      end = q.end;
      if (inSeq && t.charCodeAt(end) === COLON && (end + 1 >= e || t.charCodeAt(end + 1) === SPACE)) {
        return this.compactMap(p, col);
      }
      if (q.value.includes('${')) this.site(container, key, p, false);
    } else {
      if (!plainStart(t, p, e, false)) bail();
      // One pass: where a comment starts, and whether ': ' makes this a mapping.
      let stop = e;
      let colon = false;
      for (let r = p + 1; r < e; r++) {
        const ch = t.charCodeAt(r);
        if (ch === SPACE) {
          if (t.charCodeAt(r + 1) === HASH) {
            stop = r;
            break;
          }
        } else if (ch === COLON && (r + 1 === e || t.charCodeAt(r + 1) === SPACE)) {
          colon = true;
          break;
        }
      }
      if (colon) {
        if (!inSeq) bail();
        return this.compactMap(p, col);
      }
      while (stop > p && t.charCodeAt(stop - 1) === SPACE) stop--;
      value = plainScalar(this.plainText(p, stop));
      if (typeof value === 'string' && value.includes('${')) this.site(container, key, p, true);
      end = stop;
    }
    this.endOfLine(end);
    if (this.currentIndent() > col) bail(); // a continuation line: multi-line scalar or an error
    return value;
  }

  /**
   * The text of the plain scalar at [p, end): the string read last with the same first and last
   * character and length when it is equal. A configuration repeats its clients' types, templates
   * and key names 100,000 times: the model keeps one string of each instead of a copy per client.
   */
  private plainText(p: number, end: number): string {
    const t = this.text;
    const n = end - p;
    if (n > 64) return t.slice(p, end);
    const slot = (t.charCodeAt(p) * 31 + t.charCodeAt(end - 1) * 7 + n) & (KNOWN_VALUE_SLOTS - 1);
    const known = this.knownValues[slot];
    if (known !== undefined && known.length === n && t.startsWith(known, p)) return known;
    const value = t.slice(p, end);
    this.knownValues[slot] = value;
    return value;
  }

  /** `- key: value` (and the keys under it): a mapping that starts inside a list item's line. */
  private compactMap(p: number, _dashCol: number): Record<string, unknown> {
    const col = p - this.starts[this.li]!;
    if (++this.depth > MAX_DEPTH) bail();
    try {
      return this.map(col);
    } finally {
      this.depth--;
    }
  }

  private site(
    container: Record<string, unknown> | unknown[],
    key: string | number,
    offset: number,
    plain: boolean,
  ): void {
    this.sites.push({ container, key, segments: [...this.path], offset, plain });
  }

  // ------------------------------------------------------------------------------------ scalars

  /** A single-line quoted scalar at `p`; `end` is just after its closing quote. */
  private quoted(p: number, e: number): { value: string; end: number } {
    const t = this.text;
    if (t.charCodeAt(p) === 0x27) {
      let out: Pieces | undefined;
      let q = p + 1;
      for (;;) {
        let close = q;
        while (close < e && t.charCodeAt(close) !== 0x27) close++;
        if (close >= e) bail();
        if (t.charCodeAt(close + 1) !== 0x27)
          return { value: out ? out.add(t.slice(q, close)).done() : t.slice(q, close), end: close + 1 };
        out = (out ?? new Pieces()).add(t.slice(q, close)).add("'");
        q = close + 2;
      }
    }
    let out: Pieces | undefined;
    let q = p + 1;
    for (;;) {
      let r = q;
      while (r < e) {
        const ch = t.charCodeAt(r);
        if (ch === 0x22 || ch === 0x5c) break;
        r++;
      }
      if (r >= e) bail();
      if (t.charCodeAt(r) === 0x22) return { value: out ? out.add(t.slice(q, r)).done() : t.slice(q, r), end: r + 1 };
      out = (out ?? new Pieces()).add(t.slice(q, r));
      const esc = t[r + 1];
      const simple = esc === undefined ? undefined : ESCAPES[esc];
      if (simple !== undefined) {
        out.add(simple);
        q = r + 2;
        continue;
      }
      const width = esc === 'x' ? 2 : esc === 'u' ? 4 : esc === 'U' ? 8 : 0;
      const hex = t.slice(r + 2, r + 2 + width);
      if (width === 0 || r + 2 + width > e || !/^[0-9a-fA-F]+$/.test(hex)) bail();
      const cp = parseInt(hex, 16);
      if (cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) bail();
      out.add(String.fromCodePoint(cp));
      q = r + 2 + width;
    }
  }

  /** A flow collection that opens and closes on the current line. */
  private flow(p: number, e: number, depth: number): { value: unknown; end: number } {
    if (depth > 16) bail();
    const t = this.text;
    const isSeq = t.charCodeAt(p) === 0x5b;
    const close = isSeq ? 0x5d : 0x7d;
    let q = skipSpaces(t, p + 1, e);
    if (isSeq) {
      const items: unknown[] = [];
      const offsets = this.offsetsOf(items);
      if (t.charCodeAt(q) === close) return { value: items, end: q + 1 };
      for (;;) {
        this.path.push(items.length);
        const r = this.flowNode(q, e, depth, items, items.length);
        this.path.pop();
        items.push(r.value);
        offsets?.push(q);
        q = skipSpaces(t, r.end, e);
        const ch = t.charCodeAt(q);
        if (ch === close) break;
        if (ch !== 0x2c) bail();
        q = skipSpaces(t, q + 1, e);
        if (q >= e || t.charCodeAt(q) === close) bail();
      }
      return { value: items, end: q + 1 };
    }
    const obj: Record<string, unknown> = {};
    const offsets = this.offsetsOf(obj);
    if (t.charCodeAt(q) === close) return { value: obj, end: q + 1 };
    for (;;) {
      const keyStart = q;
      let key: string;
      let after: number;
      const c = t.charCodeAt(q);
      if (c === 0x22 || c === 0x27) {
        const k = this.quoted(q, e);
        key = k.value;
        after = k.end;
      } else {
        if (!plainStart(t, q, e, true)) bail();
        let r = q;
        while (r < e) {
          const ch = t.charCodeAt(r);
          if (ch === COLON && (r + 1 >= e || t.charCodeAt(r + 1) === SPACE)) break;
          if (ch === 0x2c || ch === 0x5b || ch === 0x5d || ch === 0x7b || ch === 0x7d || ch === HASH) bail();
          r++;
        }
        key = t.slice(q, r).trimEnd();
        if (plainScalar(key) !== key && !/^(0|[1-9][0-9]*)$/.test(key)) bail();
        after = r;
      }
      if (after - keyStart > 1024 || t.charCodeAt(after) !== COLON || t.charCodeAt(after + 1) !== SPACE) bail();
      if (Object.hasOwn(obj, key) || key === '__proto__') bail();
      q = skipSpaces(t, after + 1, e);
      this.path.push(key);
      const r = this.flowNode(q, e, depth, obj, key);
      this.path.pop();
      obj[key] = r.value;
      offsets?.push(key, keyStart, q);
      q = skipSpaces(t, r.end, e);
      const ch = t.charCodeAt(q);
      if (ch === close) break;
      if (ch !== 0x2c) bail();
      q = skipSpaces(t, q + 1, e);
      if (q >= e || t.charCodeAt(q) === close) bail();
    }
    return { value: obj, end: q + 1 };
  }

  private flowNode(
    p: number,
    e: number,
    depth: number,
    container: Record<string, unknown> | unknown[],
    key: string | number,
  ): { value: unknown; end: number } {
    const t = this.text;
    const c = t.charCodeAt(p);
    if (c === 0x5b || c === 0x7b) return this.flow(p, e, depth + 1);
    if (c === 0x22 || c === 0x27) {
      const q = this.quoted(p, e);
      if (q.value.includes('${')) this.site(container, key, p, false);
      return q;
    }
    if (!plainStart(t, p, e, true)) bail();
    let r = p;
    while (r < e) {
      const ch = t.charCodeAt(r);
      if (ch === 0x2c || ch === 0x5d || ch === 0x7d) break;
      if (ch === 0x5b || ch === 0x7b || ch === 0x22 || ch === 0x27) bail();
      if (ch === COLON && (r + 1 >= e || t.charCodeAt(r + 1) === SPACE || t.charCodeAt(r + 1) === 0x2c)) bail();
      if (ch === HASH && t.charCodeAt(r - 1) === SPACE) bail();
      r++;
    }
    const raw = t.slice(p, r).trimEnd();
    if (raw === '') bail();
    const value = plainScalar(raw);
    if (typeof value === 'string' && value.includes('${')) this.site(container, key, p, true);
    return { value, end: r };
  }
}

/**
 * A quoted scalar's pieces (the runs between escapes, and what each escape stands for), joined
 * 1,024 at a time. Appended to one string one by one, every piece stayed a string object of its
 * own as long as the value lived: 8 MB of `\"` took ~3.4 s of scavenges and 550 MB, in lots
 * ~0.2 s and 130 MB. A scalar without escapes never makes one.
 */
class Pieces {
  private readonly pieces: string[] = [];
  private readonly lots: string[] = [];

  add(piece: string): this {
    if (piece === '') return this;
    this.pieces.push(piece);
    if (this.pieces.length === 1024) {
      this.lots.push(this.pieces.join(''));
      this.pieces.length = 0;
    }
    return this;
  }

  done(): string {
    this.lots.push(this.pieces.join(''));
    return this.lots.length === 1 ? this.lots[0]! : this.lots.join('');
  }
}

const ESCAPES: Record<string, string> = {
  '0': '\0',
  a: '\x07',
  b: '\b',
  t: '\t',
  n: '\n',
  v: '\v',
  f: '\f',
  r: '\r',
  e: '\x1b',
  ' ': ' ',
  '"': '"',
  '/': '/',
  '\\': '\\',
  N: '\u0085',
  _: '\u00a0',
  L: '\u2028',
  P: '\u2029',
};

function skipSpaces(t: string, p: number, e: number): number {
  let q = p;
  while (q < e && t.charCodeAt(q) === SPACE) q++;
  return q;
}

/** Whether a plain scalar may start at `p` (YAML's ns-plain-first), conservatively. */
function plainStart(t: string, p: number, e: number, flow: boolean): boolean {
  if (p >= e) return false;
  const c = t[p]!;
  if ('-?:'.includes(c)) {
    const n = t.charCodeAt(p + 1);
    if (p + 1 >= e || n === SPACE) return false;
    if (flow && (n === 0x2c || n === 0x5b || n === 0x5d || n === 0x7b || n === 0x7d)) return false;
    return true;
  }
  return !',[]{}#&*!|>\'"%@`'.includes(c);
}
