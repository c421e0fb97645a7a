// Parsed YAML documents with their positions: parsing, interpolation on scalar nodes, and mapping
// field paths back to line/column through the AST ranges.
import {
  LineCounter,
  isAlias,
  isMap,
  isScalar,
  isSeq,
  parseAllDocuments,
  visit,
  type Document,
  type Node,
} from 'yaml';
import type { Diagnostic, PathSegment } from './diagnostics.js';
import { formatPath } from './diagnostics.js';
import { interpolateString, typedScalar, type EnvMap } from './interpolate.js';

export interface Position {
  line: number;
  column: number;
}

export interface SourceDocument {
  /** Display path of the file. */
  file: string;
  /** Index of the document inside the file (`---` separated). */
  index: number;
  doc: Document.Parsed;
  lineCounter: LineCounter;
  /** The document as plain data, after interpolation. */
  value: unknown;
  /** False when the document has YAML syntax errors: it is reported but not interpreted. */
  usable: boolean;
}

export interface ParsedFile {
  documents: SourceDocument[];
  diagnostics: Array<Diagnostic & { doc: number }>;
}

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

/**
 * Position of the node at `segments`; the deepest existing ancestor when the path does not exist.
 * With `atKey`, the position of the last segment's key in its mapping.
 */
export function locate(sd: SourceDocument, segments: readonly PathSegment[], atKey = false): Position {
  let node: unknown = sd.doc.contents;
  let offset = rangeStart(node) ?? 0;
  for (let i = 0; i < segments.length; i++) {
    const seg = segments[i];
    if (isAlias(node)) node = node.resolve(sd.doc);
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
  const pos = sd.lineCounter.linePos(offset);
  return { line: pos.line, column: pos.col };
}

/** Parses one file into documents, interpolates scalar values, reports syntax errors. */
export function parseFile(file: string, text: string, env: EnvMap): ParsedFile {
  const lineCounter = new LineCounter();
  const diagnostics: ParsedFile['diagnostics'] = [];
  const documents: SourceDocument[] = [];
  const parsed = parseAllDocuments(text, { lineCounter, prettyErrors: false, uniqueKeys: true });
  parsed.forEach((doc, index) => {
    const at = (offset: number) => {
      const p = lineCounter.linePos(offset);
      return { file, line: p.line, column: p.col, doc: index };
    };
    const problems = [...doc.errors, ...doc.warnings];
    for (const e of problems) {
      let message = `YAML: ${e.message}`;
      if (e.code === 'DUPLICATE_KEY') {
        const key = /^("[^"\n]*"|'[^'\n]*'|[^:\n]*?)\s*:/.exec(text.slice(e.pos[0]))?.[1];
        message = key ? `duplicate key ${key.startsWith('"') || key.startsWith("'") ? key : JSON.stringify(key)} in this mapping` : `YAML: ${e.message}`;
      }
      diagnostics.push({ ...at(e.pos[0]), path: '', message });
    }
    const sd: SourceDocument = { file, index, doc, lineCounter, value: undefined, usable: doc.errors.length === 0 };
    if (!sd.usable) {
      documents.push(sd);
      return;
    }
    // Interpolate values (never keys) in place, on the parsed scalars.
    visit(doc, {
      Scalar(key, node, path) {
        if (key === 'key' || typeof node.value !== 'string') return;
        if (!node.value.includes('${env:')) return;
        const result = interpolateString(node.value, env);
        if (result.errors.length > 0) {
          const segs = segmentsOf(path, node);
          const pos = at(rangeStart(node) ?? 0);
          for (const message of result.errors) diagnostics.push({ ...pos, path: formatPath(segs), message });
        }
        if (!result.changed) return;
        node.value = node.type === 'PLAIN' && result.sole && result.errors.length === 0
          ? typedScalar(result.value)
          : result.value;
      },
    });
    visit(doc, {
      Alias(_, node) {
        if (node.resolve(doc)) return;
        diagnostics.push({ ...at(rangeStart(node) ?? 0), path: '', message: `YAML: unknown alias *${node.source} (its anchor &${node.source} must come first)` });
        sd.usable = false;
      },
    });
    if (!sd.usable) {
      documents.push(sd);
      return;
    }
    try {
      sd.value = doc.toJS({ maxAliasCount: 1000 });
    } catch (err) {
      diagnostics.push({ ...at(0), path: '', message: `YAML: ${(err as Error).message}` });
      sd.usable = false;
    }
    documents.push(sd);
  });
  return { documents, diagnostics };
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
