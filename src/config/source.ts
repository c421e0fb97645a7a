// One configuration file → its documents as plain values, each able to say where a field path is
// (line and column). Three readers: JSON (`.json`), the fast YAML path (fast-yaml.ts) and, for
// whatever the fast path leaves, the `yaml` package, which gives full YAML and its diagnostics.
// Interpolation of `${env:NAME}` happens here, on parsed string values (never keys, never raw text).
import type { CST, Document, LineCounter, Node } from 'yaml';
import type { Diagnostic, PathSegment } from './diagnostics.js';
import { formatPath, NotStreamable } from './diagnostics.js';
import {
  BlockOutsideSubset,
  fastParseBlockChunks,
  fastParseYaml,
  type DeferredBlock,
  type InterpolationSite,
  type LineTable,
} from './fast-yaml.js';
import { findMisindentedLine } from './indentation.js';
import { interpolateString, typedScalar, type EnvSource } from './interpolate.js';
import { fastParseJson, parseJson } from './json-source.js';
import type { Position, PositionIndex } from './positions.js';
import { yamlLib } from './yaml-lib.js';

// The yaml package's type guards, through the lazily loaded module.
const isAlias = (n: unknown) => yamlLib().isAlias(n);
const isCollection = (n: unknown) => yamlLib().isCollection(n);
const isMap = (n: unknown) => yamlLib().isMap(n);
const isScalar = (n: unknown) => yamlLib().isScalar(n);
const isSeq = (n: unknown) => yamlLib().isSeq(n);

export type { Position } from './positions.js';

export interface SourceDocument {
  /** Display path of the file. */
  file: string;
  /** Index of the document inside the file (`---` separated). */
  index: number;
  /** The document as plain data, after interpolation. */
  value: unknown;
  /** False when the document has syntax errors: it is reported but not interpreted. */
  usable: boolean;
  /**
   * `locate` reads the text (or the yaml package's tree), never `value`: whoever reads `value`
   * may let go of its parts as it goes (the loader drops each client once it is built).
   */
  placedFromText?: true;
  /** Position of the node at `segments`: the deepest existing ancestor when the path does not exist; with `atKey`, of the last segment's key. */
  locate(segments: readonly PathSegment[], atKey?: boolean): Position;
}

export interface ParsedFile {
  documents: SourceDocument[];
  diagnostics: Array<Diagnostic & { doc: number }>;
  warnings: Diagnostic[];
  /**
   * The file is no YAML or JSON configuration at all: a document's top level is plain text (a
   * token, /proc/self/environ, /etc/passwd through a link). Its content is never quoted: the
   * loader reports it in one line that says so, instead of these diagnostics.
   */
  shapeless?: true;
}

/** A top-level value that is plain text (not a mapping, a list or empty). */
const isPlainText = (v: unknown) => v !== null && v !== undefined && typeof v !== 'object';

/** Deeper than this is refused before composing (the composer and toJS recurse). */
export const MAX_DEPTH = 100;
/** An alias may expand to at most this many nodes in one document. */
const MAX_ALIAS_COUNT = 1000;

/** Parses one file into documents, interpolates string values, reports syntax errors. */
export function parseFile(file: string, text: string, env: EnvSource): ParsedFile {
  if (/\.json$/i.test(file)) return parseJsonFile(file, text, env);
  // Without offsets first: they are found (by parsing again) only when a field has to be placed.
  const fast = fastParseYaml(text, false);
  if (fast) {
    const out: ParsedFile = { documents: [], diagnostics: [], warnings: [] };
    if (fast.value === null) {
      out.warnings.push(emptyWarning(file));
      return out;
    }
    if (isPlainText(fast.value)) return { ...out, shapeless: true };
    interpolateSites(file, fast.sites, (site) => fast.index.position(site.offset), env, out.diagnostics);
    out.documents.push(placedOnDemand(file, fast.value, yamlPositions(text)));
    return out;
  }
  return parseYamlFile(file, text, env);
}

/**
 * A file's skeleton for a load environment by environment: the fast path's value with each
 * environment's clients and endpoints left unread (DeferredBlock; parseDeferredChunks reads them).
 * Undefined when the file needs the whole load: JSON, outside the fast subset, plain text, or an
 * interpolation that fails. Without `placeable`, its places are never computed (placing one means
 * a problem to report, which the whole load does): asking for one throws NotStreamable. With it,
 * they are found as a whole read finds them (placedOnDemand). `lines`: the text's line table, when
 * built already (load.ts bodyWordsAtMostOnce), instead of scanning the text for it again.
 */
export function parseFileSkeleton(
  file: string,
  text: string,
  env: EnvSource,
  placeable = false,
  lines?: LineTable,
): { parsed: ParsedFile; deferred: DeferredBlock[]; lines?: LineTable } | undefined {
  if (/\.json$/i.test(file)) return undefined;
  const fast = fastParseYaml(text, false, true, lines);
  if (!fast) return undefined;
  const parsed: ParsedFile = { documents: [], diagnostics: [], warnings: [] };
  if (fast.value === null) {
    parsed.warnings.push(emptyWarning(file));
    return { parsed, deferred: [] };
  }
  if (isPlainText(fast.value)) return undefined;
  interpolateSites(file, fast.sites, unplaced, env, parsed.diagnostics);
  if (parsed.diagnostics.length) return undefined;
  parsed.documents.push(
    placeable
      ? placedOnDemand(file, fast.value, skeletonPositions(text))
      : { file, index: 0, value: fast.value, usable: true, placedFromText: true, locate: unplaced },
  );
  return { parsed, deferred: fast.deferred, ...(fast.lines ? { lines: fast.lines } : {}) };
}

/**
 * A deferred block's items (interpolated), `size` at a time (fast-yaml.ts fastParseBlockChunks,
 * with the skeleton's `lines` when kept); NotStreamable where only the whole load can read them.
 */
export function* parseDeferredChunks(
  file: string,
  text: string,
  block: DeferredBlock,
  env: EnvSource,
  size: number,
  lines?: LineTable,
  lineBase = 0,
): Generator<unknown[], void, void> {
  try {
    for (const { items, sites } of fastParseBlockChunks(text, block, size, lines, lineBase)) {
      const diagnostics: ParsedFile['diagnostics'] = [];
      interpolateSites(file, sites, unplaced, env, diagnostics);
      if (diagnostics.length) throw new NotStreamable(`${file}: an interpolation fails`);
      yield items;
    }
  } catch (err) {
    if (err instanceof BlockOutsideSubset) throw new NotStreamable(`${file} is outside the fast YAML subset`);
    throw err;
  }
}

export const unplaced = (): never => {
  throw new NotStreamable('a problem in it is to be placed');
};

// The re-parses of placedOnDemand, each made in a function of its own: a closure made beside
// another shares its scope, and would keep the first parse's tree (and its sites) alive as long
// as any place of the configuration is kept (a loaded state keeps one per resource).
const yamlPositions = (text: string) => () => fastParseYaml(text, true)!;
const jsonPositions = (text: string) => () => parseJson(text);
// A skeleton's text may leave the fast subset in a block not read yet: a place asked for then
// (a problem found before that block) is the whole load's to give.
const skeletonPositions = (text: string) => () => fastParseYaml(text, true) ?? unplaced();

/**
 * A document whose offsets are found on the first placement: `withPositions` parses the same text
 * again, recording them, into a tree of the same shape (interpolation changes only scalars).
 */
function placedOnDemand(
  file: string,
  value: unknown,
  withPositions: () => { value: unknown; index: PositionIndex },
): SourceDocument {
  let positioned: { value: unknown; index: PositionIndex } | undefined;
  return {
    file,
    index: 0,
    value,
    usable: true,
    placedFromText: true,
    locate: (segs, atKey = false) => {
      positioned ??= withPositions();
      return positioned.index.locate(positioned.value, segs, atKey);
    },
  };
}

function emptyWarning(file: string): Diagnostic {
  return {
    file,
    line: 1,
    column: 1,
    path: '',
    message: 'the file is empty (no document, or only comments or "---"): it defines nothing',
  };
}

function indexed(file: string, value: unknown, index: PositionIndex, usable = true): SourceDocument {
  return { file, index: 0, value, usable, locate: (segs, atKey = false) => index.locate(value, segs, atKey) };
}

function interpolateSites(
  file: string,
  sites: InterpolationSite[],
  place: (site: InterpolationSite) => Position,
  env: EnvSource,
  diagnostics: ParsedFile['diagnostics'],
): void {
  for (const s of sites) {
    const current = (s.container as Record<string | number, unknown>)[s.key];
    if (typeof current !== 'string') continue;
    const result = interpolateString(current, env);
    if (result.errors.length > 0) {
      const pos = place(s);
      for (const message of result.errors)
        diagnostics.push({ file, line: pos.line, column: pos.column, path: formatPath(s.segments), message, doc: 0 });
    }
    if (!result.changed) continue;
    (s.container as Record<string | number, unknown>)[s.key] =
      s.plain && result.sole && result.errors.length === 0 ? typedScalar(result.value) : result.value;
  }
}

function parseJsonFile(file: string, text: string, env: EnvSource): ParsedFile {
  const out: ParsedFile = { documents: [], diagnostics: [], warnings: [] };
  // JSON configuration is an object (or, wrongly, an array): anything else is no configuration.
  const first = /\S/.exec(text)?.[0];
  if (first !== undefined && first !== '{' && first !== '[') return { ...out, shapeless: true };
  const fast = fastParseJson(text);
  if (fast) {
    const doc = placedOnDemand(file, fast.value, jsonPositions(text));
    const locate = doc.locate;
    interpolateSites(file, fast.sites, (site) => locate(site.segments), env, out.diagnostics);
    out.documents.push(doc);
    return out;
  }
  const parsed = parseJson(text);
  if (parsed.error) {
    const pos = parsed.index.position(parsed.error.offset);
    out.diagnostics.push({
      file,
      line: pos.line,
      column: pos.column,
      path: formatPath(parsed.error.segments),
      message: parsed.error.message,
      doc: 0,
    });
    out.documents.push(indexed(file, undefined, parsed.index, false));
    return out;
  }
  interpolateSites(file, parsed.sites, (site) => parsed.index.position(site.offset), env, out.diagnostics);
  out.documents.push(indexed(file, parsed.value, parsed.index));
  return out;
}

// ------------------------------------------------------------------------------------------------
// The full YAML path

function rangeStart(node: unknown): number | undefined {
  if (node && typeof node === 'object' && 'range' in node) {
    const range = (node as Node).range;
    if (range) return range[0];
  }
  return undefined;
}

function keyText(key: unknown): string | undefined {
  if (isScalar(key)) return String(key.value);
  return undefined;
}

function isEmptyScalar(node: unknown): boolean {
  return isScalar(node) && node.value === null && (node.source === '' || node.source === undefined);
}

/** Position of the node at `segments` in a `yaml` document (see SourceDocument.locate). */
function locateInDoc(
  doc: Document.Parsed,
  lineCounter: LineCounter,
  segments: readonly PathSegment[],
  atKey: boolean,
): Position {
  let node: unknown = doc.contents;
  let offset = rangeStart(node) ?? 0;
  for (let i = 0; i < segments.length; i++) {
    const seg = segments[i];
    if (isAlias(node)) node = node.resolve(doc);
    if (isMap(node)) {
      const pair = node.items.find((p) => keyText(p.key) === String(seg));
      if (!pair) break;
      const keyStart = rangeStart(pair.key);
      if (i === segments.length - 1 && atKey && keyStart !== undefined) {
        offset = keyStart;
        break;
      }
      node = pair.value;
      const valueStart = isEmptyScalar(node) ? undefined : rangeStart(node);
      const start = valueStart ?? keyStart;
      if (start === undefined) break;
      offset = start;
    } else if (isSeq(node) && typeof seg === 'number') {
      node = node.items[seg];
      const start = rangeStart(node);
      if (start === undefined) break;
      offset = start;
    } else {
      break;
    }
  }
  const pos = lineCounter.linePos(offset);
  return { line: pos.line, column: pos.col };
}

/** Field path of the innermost node around `offset` (for syntax errors, which have no path of their own). */
function pathAt(doc: Document.Parsed, offset: number): PathSegment[] {
  const segs: PathSegment[] = [];
  let node: unknown = doc.contents;
  for (let depth = 0; depth < MAX_DEPTH; depth++) {
    if (isMap(node)) {
      const pair = node.items.find((p) => {
        const start = rangeStart(p.key) ?? rangeStart(p.value);
        const end = (p.value as Node | null)?.range?.[2] ?? (p.key as Node | null)?.range?.[2];
        return start !== undefined && end !== undefined && start <= offset && offset <= end;
      });
      const k = pair ? keyText(pair.key) : undefined;
      if (!pair || k === undefined) break;
      segs.push(k);
      node = pair.value;
    } else if (isSeq(node)) {
      const i = node.items.findIndex((it) => {
        const r = (it as Node | null)?.range;
        return r != null && r[0] <= offset && offset <= r[2];
      });
      if (i < 0) break;
      segs.push(i);
      node = node.items[i];
    } else break;
  }
  return segs;
}

/** Offset of the first CST node nested deeper than MAX_DEPTH, if any (walked without recursion). */
function tooDeep(tokens: readonly CST.Token[]): number | undefined {
  const stack: [CST.Token, number][] = tokens.map((t) => [t, 0]);
  while (stack.length > 0) {
    const [t, depth] = stack.pop()!;
    if (depth > MAX_DEPTH) return t.offset;
    const push = (x: CST.Token | undefined | null, d: number) => {
      if (x) stack.push([x, d]);
    };
    switch (t.type) {
      case 'document':
        push(t.value, depth);
        break;
      case 'block-map':
      case 'block-seq':
      case 'flow-collection':
        for (const it of t.items) {
          const item = it as { key?: CST.Token | null; value?: CST.Token };
          push(item.key, depth + 1);
          push(item.value, depth + 1);
        }
        break;
      default:
        break;
    }
  }
  return undefined;
}

function parseYamlFile(file: string, text: string, env: EnvSource): ParsedFile {
  const { Composer, LineCounter, Parser, visit } = yamlLib();
  const lineCounter = new LineCounter();
  const out: ParsedFile = { documents: [], diagnostics: [], warnings: [] };
  const at = (offset: number, doc: number, path: PathSegment[] = []) => {
    const p = lineCounter.linePos(offset);
    return { file, line: p.line, column: p.col, path: formatPath(path), doc };
  };
  const tokens = [...new Parser(lineCounter.addNewLine).parse(text)];
  const deep = tooDeep(tokens);
  if (deep !== undefined) {
    out.diagnostics.push({ ...at(deep, 0), message: `YAML: nesting deeper than ${MAX_DEPTH} levels` });
    out.documents.push({ file, index: 0, value: undefined, usable: false, locate: () => ({ line: 1, column: 1 }) });
    return out;
  }
  const docs = [
    ...new Composer({ prettyErrors: false, uniqueKeys: false, logLevel: 'silent' }).compose(tokens, true, text.length),
  ];
  // Plain text at the top of a document (with or without syntax errors): no configuration, not quoted.
  if (docs.some((d) => isScalar(d.contents) && isPlainText(d.contents.value))) return { ...out, shapeless: true };
  let empty = 0;
  docs.forEach((doc, index) => {
    const sd: SourceDocument = {
      file,
      index,
      value: undefined,
      usable: doc.errors.length === 0,
      placedFromText: true,
      locate: (segs, atKey = false) => locateInDoc(doc, lineCounter, segs, atKey),
    };
    // An indentation mistake is reported at its line, not where the library's parse broke down.
    // Only when it is where the library's errors are (from their first line to one past their last):
    // a guess elsewhere would hide the real problem.
    const errorLines = doc.errors.map((e) => lineCounter.linePos(e.pos[0]).line);
    const found = doc.errors.length > 0 && docs.length === 1 ? findMisindentedLine(text) : undefined;
    const misindented =
      found && found.line >= Math.min(...errorLines) && found.line <= Math.max(...errorLines) + 1 ? found : undefined;
    if (misindented)
      out.diagnostics.push({
        file,
        line: misindented.line,
        column: misindented.column,
        path: misindented.field,
        message: misindented.message,
        doc: index,
      });
    else {
      for (const e of [...doc.errors, ...doc.warnings]) {
        out.diagnostics.push({ ...at(e.pos[0], index, pathAt(doc, e.pos[0])), message: `YAML: ${e.message}` });
      }
    }
    // Keys: scalars only, each once per mapping (checked here, with field paths, in linear time).
    visit(doc, {
      Map(_, node, path) {
        const segs = segmentsOf(path, node);
        const seen = new Map<string, number>();
        for (const pair of node.items) {
          const key = isAlias(pair.key) ? pair.key.resolve(doc) : pair.key;
          const offset = rangeStart(pair.key) ?? rangeStart(node) ?? 0;
          if (isCollection(key)) {
            out.diagnostics.push({
              ...at(offset, index, segs),
              message: `a mapping key must be a plain value, not a ${isSeq(key) ? 'list' : 'mapping'}`,
            });
            sd.usable = false;
            continue;
          }
          const k = keyText(key) ?? '';
          const first = seen.get(k);
          if (first !== undefined) {
            const p = lineCounter.linePos(first);
            out.diagnostics.push({
              ...at(offset, index, [...segs, k]),
              message: `duplicate key ${JSON.stringify(k)} in this mapping (first at line ${p.line}, column ${p.col})`,
            });
            sd.usable = false;
          } else seen.set(k, offset);
        }
      },
      Alias(_, node, path) {
        if (node.resolve(doc)) return;
        out.diagnostics.push({
          ...at(rangeStart(node) ?? 0, index, segmentsOf(path, node)),
          message: `YAML: unknown alias *${node.source} (its anchor &${node.source} must come first)`,
        });
        sd.usable = false;
      },
    });
    if (!sd.usable) {
      out.documents.push(sd);
      return;
    }
    // Interpolate values (never keys) in place, on the parsed scalars.
    visit(doc, {
      Scalar(key, node, path) {
        if (key === 'key' || typeof node.value !== 'string' || !node.value.includes('${')) return;
        const result = interpolateString(node.value, env);
        if (result.errors.length > 0) {
          const pos = at(rangeStart(node) ?? 0, index, segmentsOf(path, node));
          for (const message of result.errors) out.diagnostics.push({ ...pos, message });
        }
        if (!result.changed) return;
        node.value =
          node.type === 'PLAIN' && result.sole && result.errors.length === 0 ? typedScalar(result.value) : result.value;
      },
    });
    try {
      sd.value = doc.toJS({ maxAliasCount: MAX_ALIAS_COUNT });
    } catch (err) {
      // The only throw left here is the alias guard: point at the first alias.
      let first: { offset: number; segs: PathSegment[] } | undefined;
      visit(doc, {
        Alias(_, node, path) {
          first = { offset: rangeStart(node) ?? 0, segs: segmentsOf(path, node) };
          return visit.BREAK;
        },
      });
      const message = /alias/i.test((err as Error).message)
        ? `YAML: aliases here expand to more than ${MAX_ALIAS_COUNT} nodes (an "alias bomb"); write the values out instead`
        : `YAML: ${(err as Error).message}`;
      out.diagnostics.push({ ...at(first?.offset ?? 0, index, first?.segs ?? []), message });
      sd.usable = false;
    }
    if (sd.usable && (sd.value === null || sd.value === undefined)) {
      empty++;
      return;
    }
    out.documents.push(sd);
  });
  if (docs.length === 0 || empty === docs.length) out.warnings.push(emptyWarning(file));
  return out;
}

/** Field path of a node from the visitor's ancestor list. */
function segmentsOf(path: readonly unknown[], node: unknown): PathSegment[] {
  const chain = [...path.slice(1), node];
  const segs: PathSegment[] = [];
  for (let i = 0; i + 1 < chain.length; i++) {
    const parent = chain[i];
    const child = chain[i + 1];
    if (isSeq(parent)) {
      segs.push(parent.items.indexOf(child as never));
    } else if (isMap(parent)) {
      // child is the Pair; the next element is the value node.
      const k = keyText((child as { key?: unknown }).key);
      if (k !== undefined) segs.push(k);
    }
  }
  return segs;
}
