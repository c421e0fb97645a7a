// Drift: the plan read as "what differs between the live service and the desired state", in the
// categories people know from driftctl and Terraform. A pure function of the plan (and the ignore
// rules): no I/O, deterministic order.
import type { ResourceKind } from '../model/index.js';
import { printable } from '../model/printable.js';
import { describeRule, matchAddress, matchField, noIgnoreRules, parseIgnore, type IgnoreRules } from './ignore.js';
import { mergeWarnings } from './merge.js';
import type { Action, FieldChange, Operation, Plan, PlanShard } from './types.js';

export const DRIFT_CATEGORIES = [
  'changed_outside',
  'pending',
  'missing',
  'unmanaged',
  'secret_missing',
  'expiring',
] as const;
export type DriftCategory = (typeof DRIFT_CATEGORIES)[number];

export const CATEGORY_TITLE: Record<DriftCategory, string> = {
  changed_outside: 'Changed outside kms-sync',
  pending: 'Pending (configuration changed, not applied yet)',
  missing: 'Missing from the live service',
  unmanaged: 'Unmanaged',
  secret_missing: 'Secret missing',
  expiring: 'Expiring',
};

/** Usage context of one resource, from endpoint stats and a bounded sample of recent logs. */
export interface DriftUsage {
  endpointStats?: { total: number; success: number; error: number };
  recent?: { calls: number; errors: number; errorRate: number | null; lastSeen: string | null };
}

export interface DriftUsageWindow {
  projectEnv: string;
  /** Log entries read (most recent first, bounded). */
  logsSampled: number;
  oldest: string | null;
  newest: string | null;
  /** Whether every log of the environment fit in the sample. */
  complete: boolean;
}

export interface DriftItem {
  category: DriftCategory;
  address: string;
  kind: ResourceKind;
  /** Environment of the resource; null for project-level resources. */
  projectEnv: string | null;
  /** Field-level differences (changed_outside): `before` is the live value, `after` the desired one. */
  fields: FieldChange[];
  /** Fields of this item that ignore rules cover (the item still has others). */
  ignoredFields: { path: string; rule: string }[];
  detail: string;
  /** What `kms-sync apply` would do about it (null: nothing, e.g. unmanaged resources kept). */
  action: Action | null;
  usage?: DriftUsage;
}

export interface IgnoredDriftItem extends DriftItem {
  /** The rule that ignores it: `file:line: text`. */
  rule: string;
}

export type DriftCounts = Record<DriftCategory, number> & { total: number };

export interface DriftSummary extends DriftCounts {
  /** Items that ignore rules cover entirely. */
  ignored: number;
  /** Fields of still-reported items that ignore rules cover. */
  ignoredFields: number;
  /** Per environment (project-level items under `<slug> (project)`). */
  byEnv: Record<string, DriftCounts>;
}

export interface DriftReport {
  formatVersion: 1;
  generatedAt: string;
  target: Plan['target'];
  items: DriftItem[];
  ignored: IgnoredDriftItem[];
  summary: DriftSummary;
  ignore: { source: string | null; rules: number; unused: string[] };
  warnings: string[];
  usageWindows?: DriftUsageWindow[];
  /** A shard's report (`drift --shard K/N`): what `kms-sync report merge` needs to join the shards' reports. */
  shard?: PlanShard;
}

export const emptyCounts = (): DriftCounts => ({
  changed_outside: 0,
  pending: 0,
  missing: 0,
  unmanaged: 0,
  secret_missing: 0,
  expiring: 0,
  total: 0,
});

export function envBucket(item: Pick<DriftItem, 'projectEnv' | 'address'>): string {
  if (item.projectEnv) return item.projectEnv;
  return `${item.address.replace(/^[a-z]+\./, '').split('/')[0]} (project)`;
}

const UNMANAGED_REASONS = new Set(['delete_removed_from_config', 'delete_unmanaged_prune']);

function itemFromOp(op: Operation, category: DriftCategory): DriftItem {
  return {
    category,
    address: op.address,
    kind: op.kind,
    projectEnv: op.projectEnv ?? null,
    fields: category === 'changed_outside' || category === 'pending' ? op.changes.map((c) => ({ ...c })) : [],
    ignoredFields: [],
    detail: op.reason,
    action: op.action,
  };
}

function rotateCategory(op: Operation): DriftCategory | null {
  if (op.actionReason === 'rotate_expiring') return 'expiring';
  if (op.actionReason === 'rotate_secret_missing' || op.actionReason === 'reissue_lost_key') return 'secret_missing';
  return null; // rotate_forced: asked for by the user, not drift
}

export function classifyDrift(plan: Plan, ignore: IgnoreRules = noIgnoreRules()): DriftReport {
  const raw: DriftItem[] = [];
  const seen = new Set<string>();
  const push = (item: DriftItem) => {
    const k = `${item.category}\u0000${item.address}`;
    if (seen.has(k)) return;
    seen.add(k);
    raw.push(item);
  };

  // Key findings first: a rotate operation for the same key and reason is the same drift.
  const rotations = new Map(plan.operations.filter((o) => o.action === 'rotate').map((o) => [o.address, o]));
  for (const f of plan.keyFindings) {
    const category: DriftCategory = f.finding === 'secret_missing' ? 'secret_missing' : 'expiring';
    const op = rotations.get(f.address);
    push({
      category,
      address: f.address,
      kind: 'key',
      projectEnv: f.projectEnv,
      fields: [],
      ignoredFields: [],
      detail: f.detail,
      action: op || f.rotationPlanned ? 'rotate' : null,
    });
  }
  for (const op of plan.operations) {
    switch (op.action) {
      case 'create':
        if (op.actionReason === 'reissue_lost_key') push(itemFromOp(op, 'secret_missing'));
        else push(itemFromOp(op, 'missing'));
        break;
      case 'update':
      case 'replace':
        // The old key of a rotation given its default overlap goes with the rotation reported above.
        // An older generation brought within the default overlap on its own is pending work.
        if (op.actionReason === 'expire_rotated_out') {
          if (!rotations.has(op.address)) push(itemFromOp(op, 'pending'));
          break;
        }
        // Told apart by the digest of what was last applied (plan/ownership.ts): the live object
        // moved (changed outside), the configuration moved (pending), or both.
        if (op.drift !== 'pending') push(itemFromOp(op, 'changed_outside'));
        if (op.drift === 'pending' || op.drift === 'both') push(itemFromOp(op, 'pending'));
        break;
      case 'delete':
        if (UNMANAGED_REASONS.has(op.actionReason)) push(itemFromOp(op, 'unmanaged'));
        else if (op.actionReason === 'revoke_orphan') push(itemFromOp(op, 'secret_missing'));
        break;
      case 'rotate': {
        const c = rotateCategory(op);
        if (c) push(itemFromOp(op, c));
        break;
      }
    }
  }
  for (const u of plan.unmanaged) {
    push({
      category: 'unmanaged',
      address: u.address,
      kind: u.kind,
      projectEnv: u.projectEnv,
      fields: [],
      ignoredFields: [],
      detail: u.note,
      action: null,
    });
  }

  // Ignore rules: whole items, then single fields of changed items.
  const used = new Set<number>();
  const items: DriftItem[] = [];
  const ignored: IgnoredDriftItem[] = [];
  for (const item of raw) {
    const whole = matchAddress(ignore, item.address);
    if (whole) {
      used.add(whole.line);
      ignored.push({ ...item, rule: describeRule(ignore, whole) });
      continue;
    }
    if (item.fields.length) {
      const kept: FieldChange[] = [];
      for (const f of item.fields) {
        const rule = matchField(ignore, item.address, f.path);
        if (rule) {
          used.add(rule.line);
          item.ignoredFields.push({ path: f.path, rule: describeRule(ignore, rule) });
        } else kept.push(f);
      }
      if (kept.length === 0) {
        ignored.push({
          ...item,
          rule: item.ignoredFields
            .map((f) => f.rule)
            .filter((r, i, a) => a.indexOf(r) === i)
            .join('; '),
        });
        continue;
      }
      item.fields = kept;
    }
    items.push(item);
  }

  items.sort(driftOrder);
  ignored.sort(driftOrder);

  return {
    formatVersion: 1,
    generatedAt: plan.generatedAt,
    target: plan.target,
    items,
    ignored,
    summary: summarizeDrift(items, ignored.length, plan.target.envs),
    ignore: {
      source: ignore.source || null,
      rules: ignore.rules.length,
      unused: ignore.rules.filter((r) => !used.has(r.line)).map((r) => describeRule(ignore, r)),
    },
    warnings: [...plan.warnings],
    ...(plan.shard ? { shard: plan.shard } : {}),
  };
}

/** Category, then address: the order of a report's items (and of its ignored ones). */
function driftOrder(a: DriftItem, b: DriftItem): number {
  return (
    DRIFT_CATEGORIES.indexOf(a.category) - DRIFT_CATEGORIES.indexOf(b.category) ||
    (a.address < b.address ? -1 : a.address > b.address ? 1 : 0)
  );
}

function summarizeDrift(items: readonly DriftItem[], ignored: number, envs: readonly string[]): DriftSummary {
  const summary: DriftSummary = { ...emptyCounts(), ignored, ignoredFields: 0, byEnv: {} };
  for (const env of envs) summary.byEnv[env] = emptyCounts();
  for (const item of items) {
    summary[item.category]++;
    summary.total++;
    summary.ignoredFields += item.ignoredFields.length;
    const bucket = (summary.byEnv[envBucket(item)] ??= emptyCounts());
    bucket[item.category]++;
    bucket.total++;
  }
  return summary;
}

/**
 * The drift report of the whole from its shards' (`drift --shard K/N`, each once; the caller checks
 * that): the report one run over the whole fleet makes. Items in their order, the summary counted
 * again, the ignore rules unused by every shard, warnings in the plan's order (merge.ts), usage
 * samples by environment; `generatedAt` is the earliest shard's. Refused for reports of different
 * services or ignore files.
 */
export function mergeDriftReports(parts: readonly DriftReport[]): DriftReport {
  const first = parts[0];
  if (!first) throw new Error('no drift report to merge');
  for (const r of parts) {
    if (
      r.target.url !== first.target.url ||
      r.target.credential !== first.target.credential ||
      r.target.owner !== first.target.owner
    ) {
      throw new Error(
        `the drift reports were made for different services or configurations (${first.target.url} owner ${first.target.owner}, ${r.target.url} owner ${r.target.owner})`,
      );
    }
    if (r.ignore.source !== first.ignore.source || r.ignore.rules !== first.ignore.rules) {
      throw new Error(
        `the drift reports were made with different ignore rules (${first.ignore.source ?? 'none'}, ${r.ignore.source ?? 'none'})`,
      );
    }
  }
  const cmp = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0);
  const union = (xs: string[][]) => [...new Set(xs.flat())].sort(cmp);
  const items = parts.flatMap((r) => r.items).sort(driftOrder);
  const ignored = parts.flatMap((r) => r.ignored).sort(driftOrder);
  const target: Plan['target'] = {
    ...first.target,
    projects: union(parts.map((r) => r.target.projects)),
    envs: union(parts.map((r) => r.target.envs)),
  };
  // A rule is unused when no shard used it: each shard lists those it did not use, in the file's order.
  const unused = first.ignore.unused.filter((rule) => parts.every((r) => r.ignore.unused.includes(rule)));
  const { warnings } = mergeWarnings(
    parts.map((r) => ({ warnings: r.warnings, warningOrder: r.shard?.warningOrder ?? [] })),
  );
  // Sampled by the shards that found drift (as a whole run samples when it finds any).
  const sampled = parts.some((r) => r.usageWindows);
  const windows = parts.flatMap((r) => r.usageWindows ?? []).sort((a, b) => cmp(a.projectEnv, b.projectEnv));
  return {
    formatVersion: 1,
    generatedAt: parts.map((r) => r.generatedAt).sort(cmp)[0]!,
    target,
    items,
    ignored,
    summary: summarizeDrift(items, ignored.length, target.envs),
    ignore: { ...first.ignore, unused },
    warnings,
    ...(sampled ? { usageWindows: windows } : {}),
  };
}

export const hasDrift = (report: DriftReport) => report.items.length > 0;

/**
 * Whether `rule` can be written as a line of `.kmsignore` that means exactly that one address (and
 * field): no whitespace, `#`, wildcard or control character in it, and it reads back as the same
 * address and field. Names from the service can hold anything; a rule is never guessed at.
 */
export function isSafeIgnoreRule(rule: string, address: string, field?: string): boolean {
  if (/[\s#*?\\\u0000-\u001f\u007f-\u009f\u061c\u200b-\u200f\u2028-\u202e\u2060-\u2069\ufeff]/.test(rule)) return false;
  try {
    const parsed = parseIgnore(rule, 'generated').rules;
    return parsed.length === 1 && parsed[0]!.address === address && parsed[0]!.field === field;
  } catch {
    return false;
  }
}

/**
 * Ignore rules accepting every item of the report: one line per changed field (so a new field
 * drifting later is still reported), one per resource otherwise. Lines already present are kept out.
 * An item whose address (or field) cannot be written as a safe rule (isSafeIgnoreRule) is left
 * out and its address pushed to `refused`, so the caller can say so.
 */
export function generateIgnore(report: DriftReport, existing = '', refused: string[] = []): string {
  const have = new Set(
    existing
      .split(/\r?\n/)
      .map((l) => l.replace(/(^|\s)#.*$/, '').trim())
      .filter(Boolean),
  );
  const lines: string[] = [];
  for (const item of report.items) {
    const wanted =
      item.category === 'changed_outside' && item.fields.length
        ? item.fields.map((f) => ({ rule: `${item.address}:${f.path}`, field: f.path as string | undefined }))
        : [{ rule: item.address, field: undefined as string | undefined }];
    if (wanted.some((w) => !isSafeIgnoreRule(w.rule, item.address, w.field))) {
      refused.push(item.address);
      continue;
    }
    const rules = wanted.map((w) => w.rule);
    const fresh = rules.filter((r) => !have.has(r));
    if (!fresh.length) continue;
    lines.push(`# ${CATEGORY_TITLE[item.category].toLowerCase()}: ${printable(item.detail.replace(/\s+/g, ' '))}`);
    for (const r of fresh) {
      lines.push(r);
      have.add(r);
    }
  }
  if (!lines.length) return existing;
  const header = `# kms-sync drift --gen-ignore, ${report.generatedAt} (${report.target.envs.join(', ')})`;
  const prefix = existing && !existing.endsWith('\n') ? `${existing}\n` : existing;
  return `${prefix}${prefix ? '\n' : ''}${header}\n${lines.join('\n')}\n`;
}
