// Diagnostics of the YAML front end: every problem carries file:line:column and a field path.
import { escapeUnsafe } from '../model/printable.js';

/** One problem in the configuration. `line`/`column` are 1-based; 0 means "the file as a whole". */
export interface Diagnostic {
  /** File path as shown to the user (relative to the working directory). */
  file: string;
  line: number;
  column: number;
  /** Field path inside the YAML document, e.g. `projects[0].environments[1].clients[2].ipWhitelist[1]`. */
  path: string;
  message: string;
}

export type PathSegment = string | number;

/**
 * A configuration loaded environment by environment (loadDesiredStateStreamed) met something that
 * only the whole load says as it should (a problem to place, a warning, input outside the fast
 * YAML subset): the caller loads it whole instead, which gives the same result or the same errors.
 */
export class NotStreamable extends Error {
  constructor(why: string) {
    super(`the configuration is loaded whole: ${why}`);
    this.name = 'NotStreamable';
  }
}

const IDENTIFIER = /^[A-Za-z_$][\w$-]*$/;

/** Field names repeat (projects, clients, keys…): whether each is an identifier is remembered. */
const identifierCache = new Map<string, boolean>();
const isIdentifier = (seg: string): boolean => {
  let v = identifierCache.get(seg);
  if (v === undefined) {
    v = IDENTIFIER.test(seg);
    if (identifierCache.size < 1000) identifierCache.set(seg, v);
  }
  return v;
};

/** `['projects', 0, 'environments']` → `projects[0].environments`. */
export function formatPath(segments: readonly PathSegment[]): string {
  let out = '';
  for (const seg of segments) out = appendPath(out, seg);
  return out;
}

/** A shown path `out` followed by one more segment (formatPath, one step). */
export function appendPath(out: string, seg: PathSegment): string {
  if (typeof seg === 'number') return `${out}[${seg}]`;
  if (isIdentifier(seg)) return out === '' ? seg : `${out}.${seg}`;
  return `${out}[${JSON.stringify(seg)}]`;
}

/** The field path shown for a problem at a document's top level. */
export const TOP_LEVEL = '(top level)';

/**
 * Control characters, ANSI escapes and bidirectional overrides from a configuration are shown
 * escaped, never sent to the terminal (a template named `gold\e[2J` must not clear the screen):
 * the one escaping of hostile text (model/printable.ts); messages already quote values, so
 * backslashes are kept as they are.
 */
export const escapeControls = escapeUnsafe;

/** `file:line:column: path: message`; a whole-file problem has no position and no path. */
export function formatDiagnostic(d: Diagnostic): string {
  const where = d.line > 0 ? `${d.file}:${d.line}:${d.column}` : d.file;
  const fieldPath = d.path || (d.line > 0 ? TOP_LEVEL : '');
  return escapeControls(fieldPath ? `${where}: ${fieldPath}: ${d.message}` : `${where}: ${d.message}`);
}

/** At most this many problems are listed; the rest are counted. */
export const MAX_LISTED = 50;

export function formatDiagnostics(diagnostics: readonly Diagnostic[], limit = MAX_LISTED): string {
  const lines = diagnostics.slice(0, limit).map(formatDiagnostic);
  if (diagnostics.length > limit)
    lines.push(`…and ${diagnostics.length - limit} more (${diagnostics.length} problems in all; fix these first)`);
  return lines.join('\n');
}

/** Thrown by the config layer; carries every problem found, never just the first. */
export class ConfigError extends Error {
  readonly diagnostics: Diagnostic[];

  constructor(diagnostics: Diagnostic[]) {
    const n = diagnostics.length;
    super(`${n} configuration error${n === 1 ? '' : 's'}:\n${formatDiagnostics(diagnostics)}`);
    this.name = 'ConfigError';
    this.diagnostics = diagnostics;
  }
}

/** Short place reference used inside messages (`file:line:column`). */
export function formatPlace(p: { file: string; line: number; column: number }): string {
  return p.line > 0 ? `${p.file}:${p.line}:${p.column}` : p.file;
}
