// Diagnostics of the YAML front end: every problem carries file:line:column and a field path.

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

const IDENTIFIER = /^[A-Za-z_$][\w$-]*$/;

/** `['projects', 0, 'environments']` → `projects[0].environments`. */
export function formatPath(segments: readonly PathSegment[]): string {
  let out = '';
  for (const seg of segments) {
    if (typeof seg === 'number') out += `[${seg}]`;
    else if (IDENTIFIER.test(seg)) out += out === '' ? seg : `.${seg}`;
    else out += `[${JSON.stringify(seg)}]`;
  }
  return out;
}

/** `file:line:column: path: message` (position and path left out when unknown). */
export function formatDiagnostic(d: Diagnostic): string {
  const where = d.line > 0 ? `${d.file}:${d.line}:${d.column}` : d.file;
  return d.path ? `${where}: ${d.path}: ${d.message}` : `${where}: ${d.message}`;
}

export function formatDiagnostics(diagnostics: readonly Diagnostic[]): string {
  return diagnostics.map(formatDiagnostic).join('\n');
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
