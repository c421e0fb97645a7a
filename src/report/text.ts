// Terminal rendering of a plan, in the shape people know from `terraform plan`.
import { escapeUnsafe, printable as p, quoted } from '../model/printable.js';
import {
  blockedChanges,
  describeSecurityChange,
  type Action,
  type KeyAfter,
  type Operation,
  type Plan,
} from '../plan/types.js';
import { keyTerms, MARKERS_ONLY_NOTE, revokedKeys, shownAttributes, shownChanges } from './present.js';

export interface TextOptions {
  color: boolean;
}

const ANSI = {
  reset: '\x1b[0m',
  bold: '\x1b[1m',
  dim: '\x1b[2m',
  red: '\x1b[31m',
  green: '\x1b[32m',
  yellow: '\x1b[33m',
  cyan: '\x1b[36m',
  magenta: '\x1b[35m',
};
type Style = keyof typeof ANSI;

export function colorEnabled(stream: { isTTY?: boolean }, env: NodeJS.ProcessEnv = process.env): boolean {
  if (env.NO_COLOR !== undefined && env.NO_COLOR !== '') return false;
  if (env.FORCE_COLOR && env.FORCE_COLOR !== '0') return true;
  return Boolean(stream.isTTY) && env.TERM !== 'dumb';
}

const SYMBOL: Record<Action, [string, Style]> = {
  create: ['+', 'green'],
  update: ['~', 'yellow'],
  delete: ['-', 'red'],
  replace: ['-/+', 'magenta'],
  rotate: ['↻', 'cyan'],
};

const VERB: Record<Action, string> = {
  create: 'will be created',
  update: 'will be updated in place',
  delete: 'will be destroyed',
  replace: 'must be replaced',
  rotate: 'will be rotated',
};

export function formatValue(v: unknown): string {
  if (v === null || v === undefined) return 'null';
  if (typeof v === 'string') return quoted(v);
  if (Array.isArray(v)) return `[${v.map(formatValue).join(', ')}]`;
  if (typeof v === 'object') {
    const entries = Object.entries(v as Record<string, unknown>);
    if (entries.length === 0) return '{}';
    return `{ ${entries.map(([k, x]) => `${/^[A-Za-z_][\w-]*$/.test(k) ? k : quoted(k)} = ${formatValue(x)}`).join(', ')} }`;
  }
  return String(v);
}

function attributeLines(op: Operation, paint: (s: Style, t: string) => string): string[] {
  const pad = (names: string[]) => Math.max(0, ...names.map((n) => n.length));
  if (op.action === 'create') {
    const after = shownAttributes(op.after);
    const keys = (after.keys as KeyAfter[] | undefined) ?? undefined;
    delete after.keys;
    const names = Object.keys(after).concat(keys ? ['keys'] : []);
    const w = pad(names);
    const lines = Object.entries(after).map(([k, v]) => `${paint('green', '+')} ${p(k).padEnd(w)} = ${formatValue(v)}`);
    if (keys) {
      // One line per key: its lifetime and rotation, and where its raw value goes.
      lines.push(`${paint('green', '+')} ${'keys'.padEnd(w)} = [`);
      for (const k of keys)
        lines.push(
          `    ${p(k.name)}: ${p(keyTerms(k))}; raw value → ${p(k.secret.store ?? 'default store')}:${p(k.secret.name)}`,
        );
      lines.push(']');
    }
    if (op.kind === 'key' && op.after) {
      const secret = (op.after as { secret?: { store?: string; name: string } }).secret;
      if (secret) lines.push(`  (raw value goes to ${p(secret.store ?? 'the default store')} as ${p(secret.name)})`);
    }
    return lines;
  }
  if (op.action === 'rotate') {
    const before = op.before as { expiresAt?: string | null } | null;
    const after = op.after as { ttl?: string; expiresAt?: string; secret?: { store?: string; name: string } } | null;
    return [
      `${paint('red', '-')} current key  = ${p(op.live?.keyId ?? '?')} (expires ${p(before?.expiresAt ?? 'never')}; kept until it expires or the overlap passes)`,
      `${paint('green', '+')} new key      = ${after?.ttl ? `lives ${after.ttl}` : after?.expiresAt ? `expires ${after.expiresAt}` : 'no expiry'}, raw value → ${p(after?.secret?.store ?? 'default store')}:${p(after?.secret?.name ?? '?')}`,
    ];
  }
  if (op.action === 'delete') {
    const before = shownAttributes(op.before);
    const revoked = revokedKeys(op);
    if (revoked) delete before.keys;
    const w = pad(Object.keys(before));
    const lines = Object.entries(before).map(([k, v]) => `${paint('red', '-')} ${p(k).padEnd(w)} = ${formatValue(v)}`);
    if (revoked)
      lines.push(
        revoked.length
          ? `  (revokes its ${revoked.length} key(s): ${revoked.map(p).join(', ')})`
          : '  (it has no keys)',
      );
    return lines;
  }
  const { changes, markersOnly } = shownChanges(op);
  if (markersOnly) return [`  (${MARKERS_ONLY_NOTE})`];
  const w = pad(changes.map((c) => c.path));
  return changes.map((c) => {
    if (c.before === null) return `${paint('green', '+')} ${p(c.path).padEnd(w)} = ${formatValue(c.after)}`;
    if (c.after === null) return `${paint('red', '-')} ${p(c.path).padEnd(w)} = ${formatValue(c.before)}`;
    return `${paint('yellow', '~')} ${p(c.path).padEnd(w)} = ${formatValue(c.before)} -> ${formatValue(c.after)}`;
  });
}

/** Each operation's block of the plan text (a blank line after each). */
function operationLines(ops: readonly Operation[], paint: (s: Style, t: string) => string): string[] {
  const out: string[] = [];
  for (const op of ops) {
    const [sym, style] = SYMBOL[op.action];
    out.push(paint('bold', `  # ${p(op.address)} ${VERB[op.action]}`) + paint('dim', ` (${p(op.reason)})`));
    out.push(`  ${paint(style, sym)} ${op.kind} "${p(op.address.slice(op.kind.length + 1))}" {`);
    for (const line of attributeLines(op, paint)) out.push(`      ${line}`);
    out.push('    }');
    out.push('');
  }
  return out;
}

/** The plan text's blocks of some operations: a plan listed environment by environment (apply of a large fleet). */
export function renderOperationsText(ops: readonly Operation[], opts: TextOptions): string {
  const paint = (s: Style, t: string) => (opts.color ? `${ANSI[s]}${t}${ANSI.reset}` : t);
  return operationLines(ops, paint)
    .map((l) => `${l}\n`)
    .join('');
}

export function renderPlanText(plan: Plan, opts: TextOptions): string {
  const paint = (s: Style, t: string) => (opts.color ? `${ANSI[s]}${t}${ANSI.reset}` : t);
  const out: string[] = [];
  out.push(renderHeader(plan, paint));
  out.push('');
  const blocked = blockedChanges(plan).length;
  out.push(...securityLines(plan, paint));
  if (plan.operations.length === 0 && blocked > 0) {
    out.push(
      paint(
        'red',
        `No changes can be made, but ${blocked} resource(s) differ from the configuration: another configuration owns them (see below).`,
      ),
    );
  } else if (plan.operations.length === 0 && plan.security?.length) {
    out.push('No resource changes; only the security changes above.');
  } else if (plan.operations.length === 0) {
    out.push(paint('green', 'No changes.') + ' The live service matches the configuration.');
  } else {
    out.push('kms-sync will perform the following actions:');
    out.push('');
    out.push(...operationLines(plan.operations, paint));
  }
  // Findings the plan acts on show as operations; the others (a secret not held, a key expiring
  // without auto-rotation) are said here, so a plan with no changes still tells about them.
  const unplanned = plan.keyFindings.filter((f) => !f.rotationPlanned);
  if (unplanned.length) {
    out.push(paint('bold', `Key findings (${unplanned.length}, no action planned):`));
    for (const f of unplanned) out.push(`  ${paint('yellow', '!')} ${p(f.address)}: ${p(f.detail)}`);
    out.push('');
  }
  if (plan.unmanaged.length) {
    out.push(paint('bold', `Unmanaged resources in scope (${plan.unmanaged.length}, kept):`));
    for (const u of plan.unmanaged) out.push(`  ${paint('dim', '?')} ${p(u.address)}: ${p(u.note)}`);
    out.push('');
  }
  if (plan.warnings.length) {
    for (const w of plan.warnings)
      out.push(`${paint('yellow', 'Warning:')} ${w.split('\n').map(escapeUnsafe).join('\n')}`);
    out.push('');
  }
  const s = plan.summary;
  out.push(
    `${paint('bold', 'Plan:')} ${s.create} to create, ${s.update} to update, ${s.replace} to replace, ${s.rotate} to rotate, ${s.delete} to delete.`,
  );
  return out.join('\n') + '\n';
}

/**
 * The security section (stores, recipients, owner, `${env:}` reads; plan/types.ts SecurityChange):
 * first, before the resources, so that a reviewer of a pull request cannot miss it.
 */
export function securityLines(plan: Plan, paint: (s: Style, t: string) => string = (_s, t) => t): string[] {
  const changes = plan.security ?? [];
  if (changes.length === 0) return [];
  return [
    paint(
      'bold',
      `Security changes (${changes.length}): who can read keys, where store credentials go, what the configuration reads`,
    ) + (plan.trustBase ? ` (compared with the base ${p(plan.trustBase)})` : ''),
    ...changes.map(
      (c) =>
        `  ${paint(c.kind === 'recipient_added' && c.holds ? 'red' : 'yellow', '!')} ${p(describeSecurityChange(c))}`,
    ),
    '',
  ];
}

export function renderHeader(plan: Plan, paint: (s: Style, t: string) => string = (_s, t) => t): string {
  const cred =
    plan.target.credential === 'live'
      ? paint('red', paint('bold', 'LIVE credential (sk_live_): changes affect production traffic'))
      : plan.target.credential === 'test'
        ? 'test credential (sk_test_)'
        : 'credential of unknown kind';
  return `Target: ${p(plan.target.url)}\nEnvironments: ${plan.target.envs.map(p).join(', ') || '(none)'}\nCredential: ${cred}\nOwner: ${p(plan.target.owner)}`;
}
