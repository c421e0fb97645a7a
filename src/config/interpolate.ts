// `${env:NAME}` / `${env:NAME:-default}` interpolation, applied to parsed scalar values (never to
// raw text, so a variable can never inject YAML structure). `$${env:...}` is a literal `${env:...}`.

export type EnvMap = Record<string, string | undefined>;

export interface InterpolationResult {
  value: string;
  /** Human messages for unset variables and malformed references. */
  errors: string[];
  /** True when at least one reference was replaced or unescaped. */
  changed: boolean;
  /** True when the whole text was exactly one `${env:...}` reference. */
  sole: boolean;
}

const START = /\$?\$\{env:/g;
const BODY = /^([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}/;

export function interpolateString(text: string, env: EnvMap): InterpolationResult {
  const errors: string[] = [];
  let out = '';
  let pos = 0;
  let changed = false;
  let references = 0;
  let sole = false;
  START.lastIndex = 0;
  for (let m = START.exec(text); m; m = START.exec(text)) {
    const at = m.index;
    if (m[0].startsWith('$$')) {
      out += text.slice(pos, at) + '${env:';
      pos = at + m[0].length;
      changed = true;
      continue;
    }
    const rest = text.slice(at + m[0].length);
    const body = BODY.exec(rest);
    if (!body) {
      const close = rest.indexOf('}');
      const shown = close >= 0 ? text.slice(at, at + m[0].length + close + 1) : text.slice(at);
      errors.push(
        `malformed reference ${JSON.stringify(shown)}: use \${env:NAME} or \${env:NAME:-default} ` +
          `(NAME: letters, digits, underscores), or $\${env:...} for a literal`,
      );
      out += text.slice(pos, at + m[0].length);
      pos = at + m[0].length;
      continue;
    }
    const name = body[1] ?? '';
    const fallback = body[2];
    const set = env[name];
    let value: string;
    if (fallback !== undefined) {
      value = set === undefined || set === '' ? fallback : set;
    } else if (set === undefined) {
      errors.push(
        `environment variable ${name} is not set (set it, or give a default: \${env:${name}:-default})`,
      );
      value = '';
    } else {
      value = set;
    }
    references++;
    if (at === 0 && at + m[0].length + body[0].length === text.length) sole = true;
    out += text.slice(pos, at) + value;
    pos = at + m[0].length + body[0].length;
    START.lastIndex = pos;
    changed = true;
  }
  out += text.slice(pos);
  return { value: out, errors, changed, sole: sole && references === 1 };
}

/** Escapes text so that interpolation gives it back unchanged (used by the exporter). */
export function escapeInterpolation(text: string): string {
  return text.replaceAll('${env:', () => '$${env:'); // a function: '$$' in a replacement string means '$'
}

/**
 * Typing of a plain (unquoted) scalar that was exactly one reference, as YAML would have typed the
 * substituted text: integers, floats and booleans. Everything else stays a string.
 */
export function typedScalar(value: string): string | number | boolean {
  if (/^(true|True|TRUE)$/.test(value)) return true;
  if (/^(false|False|FALSE)$/.test(value)) return false;
  if (/^[-+]?\d+$/.test(value)) {
    const n = Number(value);
    return Number.isSafeInteger(n) ? n : value;
  }
  if (/^[-+]?(\.\d+|\d+\.\d*)([eE][-+]?\d+)?$/.test(value) || /^[-+]?\d+[eE][-+]?\d+$/.test(value)) {
    return Number(value);
  }
  return value;
}
