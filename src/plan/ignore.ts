// `.kmsignore`: drift the team has accepted, by resource address and optionally field path.
//
//   # comment (also after whitespace at the end of a line)
//   client.shop-production/by-hand                 one resource, every category
//   endpoint.shop-production/GET:/sdk/**           `**` crosses `/`; `*` stays inside one segment
//   client.*/globex:metadata.team                  one field of a changed resource (and its children)
//   key.*/*/*:expiresAt                            `*` in a field path stays inside one `.` segment
//
// A field is split off at the last `:` whose remainder is a field path starting with a field name
// kms-sync compares (or a wildcard), so `endpoint.e/POST:/v1/orders:cancel` stays one address.
// Ignored drift is counted in the report as ignored, never silently dropped.
import { summarize, type Operation, type Plan } from './types.js';

export const IGNORE_FILE_NAME = '.kmsignore';

/** Top-level fields the plan compares; a `:suffix` is a field path only when it starts with one. */
const FIELD_ROOTS = new Set([
  'name',
  'description',
  'url',
  'type',
  'template',
  'ipWhitelist',
  'metadata',
  'rateLimitDay',
  'maxClients',
  'expiresAt',
  'autoRotate',
  'request',
  'response',
  'method',
  'path',
]);
const FIELD_RE = /^(?:\*\*|\*|[A-Za-z_][\w-]*)(?:\.(?:\*\*|\*|[^.\s:]+))*$/;

export interface IgnoreRule {
  /** 1-based line in the source file. */
  line: number;
  /** The rule as written (without comment). */
  text: string;
  address: string;
  field?: string;
  addressRe: RegExp;
  fieldRe?: RegExp;
}

export interface IgnoreRules {
  /** Where the rules came from (a path relative to cwd, or a label). */
  source: string;
  rules: IgnoreRule[];
}

export class IgnoreParseError extends Error {}

export const noIgnoreRules = (): IgnoreRules => ({ source: '', rules: [] });

function globRe(glob: string, sep: string): RegExp {
  let body = '';
  for (let i = 0; i < glob.length; i++) {
    const ch = glob[i]!;
    if (ch === '*') {
      if (glob[i + 1] === '*') {
        body += '.*';
        i++;
      } else body += `[^${sep === '/' ? '/' : '.'}]*`;
    } else if (ch === '?') body += `[^${sep === '/' ? '/' : '.'}]`;
    else body += ch.replace(/[.+^${}()|[\]\\]/g, '\\$&');
  }
  return new RegExp(`^${body}$`);
}

function splitRule(text: string): { address: string; field?: string } {
  for (let i = text.lastIndexOf(':'); i > 0; i = text.lastIndexOf(':', i - 1)) {
    const rest = text.slice(i + 1);
    const root = rest.split('.')[0] ?? '';
    if (FIELD_RE.test(rest) && (FIELD_ROOTS.has(root) || root.includes('*')))
      return { address: text.slice(0, i), field: rest };
  }
  return { address: text };
}

const ADDRESS_RE = /^(?:\*\*|\*|project|env|template|client|key|endpoint)(?:\.|$)/;

export function parseIgnore(text: string, source: string): IgnoreRules {
  const rules: IgnoreRule[] = [];
  const problems: string[] = [];
  text.split(/\r?\n/).forEach((raw, idx) => {
    const line = raw.replace(/(^|\s)#.*$/, '').trim();
    if (!line) return;
    if (/\s/.test(line)) {
      problems.push(
        `${source}:${idx + 1}: a rule is one address (optionally :field.path) without spaces, got ${JSON.stringify(line)}`,
      );
      return;
    }
    const { address, field } = splitRule(line);
    if (!ADDRESS_RE.test(address)) {
      problems.push(
        `${source}:${idx + 1}: ${JSON.stringify(address)} is not a resource address (kind.env/name, e.g. client.shop-production/globex; wildcards * and **)`,
      );
      return;
    }
    rules.push({
      line: idx + 1,
      text: line,
      address,
      addressRe: globRe(address, '/'),
      ...(field !== undefined ? { field, fieldRe: globRe(field, '.') } : {}),
    });
  });
  if (problems.length) throw new IgnoreParseError(problems.join('\n'));
  return { source, rules };
}

/** A field rule covers the path itself and everything under it (`metadata` covers `metadata.team`). */
function fieldMatches(re: RegExp, path: string): boolean {
  const parts = path.split('.');
  for (let n = parts.length; n > 0; n--) if (re.test(parts.slice(0, n).join('.'))) return true;
  return false;
}

/** The rule ignoring a whole resource, if any. */
export function matchAddress(rules: IgnoreRules, address: string): IgnoreRule | undefined {
  return rules.rules.find((r) => r.field === undefined && r.addressRe.test(address));
}

/** The rule ignoring one field of a resource (a whole-resource rule covers every field). */
export function matchField(rules: IgnoreRules, address: string, path: string): IgnoreRule | undefined {
  return rules.rules.find(
    (r) => r.addressRe.test(address) && (r.fieldRe === undefined || fieldMatches(r.fieldRe, path)),
  );
}

export function describeRule(rules: IgnoreRules, rule: IgnoreRule): string {
  return `${rules.source || IGNORE_FILE_NAME}:${rule.line}: ${rule.text}`;
}

/**
 * `.kmsignore` in plans: a resource that a whole-resource rule ignores is never deleted (not even
 * with --prune): it is kept and listed with the rule. A change to a field that a rule ignores is
 * still applied (the configuration wins), with a warning saying so.
 */
export function applyIgnoreRules(plan: Plan, rules: IgnoreRules): Plan {
  if (rules.rules.length === 0) return plan;
  const operations: Operation[] = [];
  const unmanaged = [...plan.unmanaged];
  const warnings = [...plan.warnings];
  for (const op of plan.operations) {
    const whole = matchAddress(rules, op.address);
    if (whole && op.action === 'delete') {
      if (op.projectEnv)
        unmanaged.push({
          address: op.address,
          kind: op.kind,
          projectEnv: op.projectEnv,
          note: `not deleted: ignored by ${describeRule(rules, whole)}`,
        });
      continue;
    }
    for (const c of op.changes) {
      const rule = matchField(rules, op.address, c.path);
      if (rule)
        warnings.push(
          `${op.address}: ${c.path} is ignored for drift by ${describeRule(rules, rule)}, but this plan changes it to the configured value`,
        );
    }
    operations.push(op);
  }
  if (
    operations.length === plan.operations.length &&
    unmanaged.length === plan.unmanaged.length &&
    warnings.length === plan.warnings.length
  )
    return plan;
  unmanaged.sort((a, b) => (a.address < b.address ? -1 : a.address > b.address ? 1 : 0));
  return { ...plan, operations, unmanaged, warnings, summary: summarize(operations, unmanaged) };
}
