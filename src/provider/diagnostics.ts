// Diagnostics as the protocol carries them: severity, summary, detail and the attribute path
// Terraform underlines in the configuration. Summary and detail pass the one redaction
// (model/redact.ts) and escaping (model/printable.ts) and long values are cut, as in the CLI.
import { cutLongValues, escapeUnsafe } from '../model/printable.js';
import { redactCredentials } from '../model/redact.js';

const shown = (text: string) => cutLongValues(redactCredentials(text)).split('\n').map(escapeUnsafe).join('\n');

/** A step of an attribute path: attribute name, list index, or `{ key }` of a map element. */
export type PathStep = string | number | { key: string };

export interface ProtoDiagnostic {
  severity: 'ERROR' | 'WARNING';
  summary: string;
  detail: string;
  attribute?: { steps: ({ attribute_name: string } | { element_key_int: number } | { element_key_string: string })[] };
}

export function attributePath(path: readonly PathStep[]) {
  return {
    steps: path.map((s) =>
      typeof s === 'string'
        ? { attribute_name: s }
        : typeof s === 'number'
          ? { element_key_int: s }
          : { element_key_string: s.key },
    ),
  };
}

export class Diagnostics {
  readonly list: ProtoDiagnostic[] = [];

  error(summary: string, detail = '', path?: readonly PathStep[]): this {
    this.list.push({
      severity: 'ERROR',
      summary: shown(summary),
      detail: shown(detail),
      ...(path ? { attribute: attributePath(path) } : {}),
    });
    return this;
  }

  warning(summary: string, detail = '', path?: readonly PathStep[]): this {
    this.list.push({
      severity: 'WARNING',
      summary: shown(summary),
      detail: shown(detail),
      ...(path ? { attribute: attributePath(path) } : {}),
    });
    return this;
  }

  get hasErrors(): boolean {
    return this.list.some((d) => d.severity === 'ERROR');
  }
}

/** A failure that already knows its diagnostic (summary, detail, attribute). */
export class DiagnosticError extends Error {
  readonly summary: string;
  readonly detail: string;
  readonly path: readonly PathStep[] | undefined;
  constructor(summary: string, detail = '', path?: readonly PathStep[]) {
    super(detail ? `${summary}: ${detail}` : summary);
    this.summary = summary;
    this.detail = detail;
    this.path = path;
  }
}

export function diagnosticsOf(e: unknown, summary = 'terraform-provider-kms failed'): ProtoDiagnostic[] {
  const d = new Diagnostics();
  if (e instanceof DiagnosticError) d.error(e.summary, e.detail, e.path);
  else d.error(summary, e instanceof Error ? e.message : String(e));
  return d.list;
}
