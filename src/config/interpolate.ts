// `${env:NAME}` / `${env:NAME:-default}` interpolation, applied to parsed scalar values (never to
// raw text, so a variable can never inject YAML structure). `$${` is a literal `${`.
// Variables that hold credentials are refused (refusal below): a configuration is written by
// whoever opens a pull request, and what it interpolates lands in plans and PR comments.
import { holdsCredential, isCredentialEnvName } from '../model/redact.js';

export type EnvMap = Record<string, string | undefined>;

/**
 * Variables read under the operator's allowlist (model/policy.ts): a name it does not allow is an
 * error naming the policy setting (a default is used only while the variable is unset: its value
 * is never read). `read` collects the names read, for the plan's security section.
 */
export class PolicedEnv {
  readonly read = new Set<string>();
  readonly vars: EnvMap;
  readonly allowed: (name: string) => boolean;
  /** How to allow a variable, for the error. */
  readonly how: (name: string) => string;
  constructor(vars: EnvMap, allowed: (name: string) => boolean, how: (name: string) => string) {
    this.vars = vars;
    this.allowed = allowed;
    this.how = how;
  }
}

/** A plain map (tests, libraries: no allowlist beyond the credential refusal) or a PolicedEnv. */
export type EnvSource = EnvMap | PolicedEnv;

export interface InterpolationResult {
  value: string;
  /** Human messages for unset variables and malformed references. */
  errors: string[];
  /** True when at least one reference was replaced or unescaped. */
  changed: boolean;
  /** True when the whole text was exactly one `${env:...}` reference. */
  sole: boolean;
}

const NAME = /^[A-Za-z_][A-Za-z0-9_]*/;
const MAX_NESTING = 8;
const HINT =
  'use ${env:NAME} or ${env:NAME:-default} (NAME: letters, digits, underscores; the default may itself hold references), or $${ for a literal ${';

/** Index of the `}` closing the reference whose body starts at `from` (nested `${…}` skipped), or -1. */
function closingBrace(text: string, from: number): number {
  let depth = 0;
  for (let i = from; i < text.length; i++) {
    const c = text[i];
    if (c === '$' && text[i + 1] === '{') {
      depth++;
      i++;
    } else if (c === '}') {
      if (depth === 0) return i;
      depth--;
    }
  }
  return -1;
}

/**
 * Why `${env:NAME}` may not be read, or undefined: a variable that holds a credential, by its name
 * (isCredentialEnvName: KMS_API_KEY, GITHUB_TOKEN, VAULT_TOKEN, *_TOKEN, *_SECRET*, *_PASSWORD,
 * *_KEY, …) or by its value (a known credential's value, or text shaped like a key or token).
 */
function refusal(name: string, env: EnvMap): string | undefined {
  const why = isCredentialEnvName(name)
    ? 'its name marks a credential'
    : env[name] && holdsCredential(env[name]!, env as NodeJS.ProcessEnv)
      ? 'its value holds a credential'
      : undefined;
  if (!why) return undefined;
  return (
    `environment variable ${name} holds a credential (${why}): a configuration may not read credentials, ` +
    'because what it interpolates is shown in plans, reports and pull-request comments (see docs/security.md#credentials-and-hostile-text)'
  );
}

/**
 * Replaces `${env:NAME}` and `${env:NAME:-default}` (the default may hold references itself);
 * `$${` is a literal `${`. Any other `${…}` is an error, never passed through as a value.
 */
export function interpolateString(text: string, source: EnvSource, nesting = 0): InterpolationResult {
  const policed = source instanceof PolicedEnv ? source : undefined;
  const env = policed ? policed.vars : (source as EnvMap);
  const errors: string[] = [];
  let out = '';
  let pos = 0;
  let changed = false;
  let references = 0;
  let sole = false;
  for (let at = text.indexOf('${'); at >= 0; at = text.indexOf('${', pos)) {
    if (at > 0 && text[at - 1] === '$') {
      out += text.slice(pos, at - 1) + '${';
      pos = at + 2;
      changed = true;
      continue;
    }
    const close = closingBrace(text, at + 2);
    const whole = close < 0 ? text.slice(at) : text.slice(at, close + 1);
    const body = close < 0 ? undefined : text.slice(at + 2, close);
    const name = body?.startsWith('env:') ? NAME.exec(body.slice(4))?.[0] : undefined;
    const rest = name === undefined || body === undefined ? undefined : body.slice(4 + name.length);
    if (close < 0 || name === undefined || (rest !== '' && !rest?.startsWith(':-'))) {
      errors.push(
        `malformed reference ${JSON.stringify(whole.length > 60 ? `${whole.slice(0, 57)}...` : whole)}: ${HINT}`,
      );
      out += text.slice(pos, close < 0 ? text.length : close + 1);
      pos = close < 0 ? text.length : close + 1;
      continue;
    }
    const unlisted =
      policed && !policed.allowed(name) && !(rest !== '' && (env[name] === undefined || env[name] === ''));
    const refused = unlisted
      ? `environment variable ${name} is not allowed by the operator policy: a configuration reads only the variables the operator allows (allow it with ${policed!.how(name)}; see docs/security.md#the-operator-policy)`
      : refusal(name, env);
    if (refused) {
      errors.push(refused);
      references++;
      out += text.slice(pos, at);
      pos = close + 1;
      changed = true;
      continue;
    }
    const set = env[name];
    let value: string;
    if (rest !== '') {
      if (set !== undefined && set !== '') value = set;
      else if (nesting >= MAX_NESTING) {
        errors.push(`references nested more than ${MAX_NESTING} deep in ${JSON.stringify(whole.slice(0, 60))}`);
        value = '';
      } else {
        const inner = interpolateString(rest!.slice(2), source, nesting + 1);
        errors.push(...inner.errors);
        value = inner.value;
      }
    } else if (set === undefined) {
      errors.push(`environment variable ${name} is not set (set it, or give a default: \${env:${name}:-default})`);
      value = '';
    } else {
      value = set;
    }
    if (set !== undefined && set !== '') policed?.read.add(name);
    references++;
    if (at === 0 && close === text.length - 1) sole = true;
    out += text.slice(pos, at) + value;
    pos = close + 1;
    changed = true;
  }
  out += text.slice(pos);
  return { value: out, errors, changed, sole: sole && references === 1 };
}

/** Escapes text so that interpolation gives it back unchanged (used by the exporter). */
export function escapeInterpolation(text: string): string {
  return text.replaceAll('${', () => '$${'); // a function: '$$' in a replacement string means '$'
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
