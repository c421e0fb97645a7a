// The drift report back from its JSON (drift-json.ts driftToJson), for `kms-sync report merge`: a
// shard's report (drift --shard K/N --json) carries the order of its warnings in its `shard` block.
import type { ResourceKind } from '../model/index.js';
import type { DriftCategory, DriftItem, DriftReport, DriftUsage, IgnoredDriftItem } from '../plan/drift.js';
import type { Action, FieldChange, Plan, PlanShard, WarningOrder } from '../plan/types.js';
import { list, obj, PlanJsonError, text, type Json } from './plan-from-json.js';

function usageFrom(u: Json): DriftUsage {
  const out: DriftUsage = {};
  if (u.endpoint_stats) out.endpointStats = u.endpoint_stats as NonNullable<DriftUsage['endpointStats']>;
  if (u.recent) {
    const r = obj(u.recent, 'usage.recent');
    out.recent = {
      calls: Number(r.calls),
      errors: Number(r.errors),
      errorRate: r.error_rate as number | null,
      lastSeen: r.last_seen as string | null,
    };
  }
  return out;
}

function itemFrom(raw: unknown, what: string): DriftItem {
  const i = obj(raw, what);
  return {
    category: text(i.category, `${what}.category`) as DriftCategory,
    address: text(i.address, `${what}.address`),
    kind: text(i.type, `${what}.type`).replace(/^kms_/, '') as ResourceKind,
    projectEnv: typeof i.project_env === 'string' ? i.project_env : null,
    fields: list(i.fields, `${what}.fields`).map((f): FieldChange => {
      const x = obj(f, `${what}.fields[]`);
      return { path: text(x.path, `${what}.fields[].path`), before: x.live, after: x.desired };
    }),
    ignoredFields: list(i.ignored_fields, `${what}.ignored_fields`) as DriftItem['ignoredFields'],
    detail: text(i.detail, `${what}.detail`),
    action: (i.planned_action ?? null) as Action | null,
    ...(i.usage ? { usage: usageFrom(obj(i.usage, `${what}.usage`)) } : {}),
  };
}

/** A JSON drift report (kms-sync drift --json) as the report object its renderers take. */
export function driftFromJson(value: unknown): DriftReport {
  const j = obj(value, 'the drift report');
  if (j.kind !== 'kms-sync/drift' || !Array.isArray(j.items))
    throw new PlanJsonError(
      'not a kms-sync JSON drift report (kms-sync drift --json): no kind kms-sync/drift and items',
    );
  const t = obj(j.target, 'target');
  const ignore = obj(j.ignore, 'ignore');
  const shardBlock = j.shard === undefined ? undefined : obj(j.shard, 'shard');
  const shard: PlanShard | undefined = shardBlock
    ? {
        index: Number(shardBlock.index) - 1,
        count: Number(shardBlock.count),
        files: list(shardBlock.files ?? [], 'shard.files') as string[],
        warningOrder: list(shardBlock.warning_order, 'shard.warning_order') as WarningOrder[],
      }
    : undefined;
  const items = j.items.map((x, n) => itemFrom(x, `items[${n}]`));
  const ignored = list(j.ignored, 'ignored').map(
    (x, n): IgnoredDriftItem => ({
      ...itemFrom(x, `ignored[${n}]`),
      rule: text(obj(x, 'ignored[]').rule, `ignored[${n}].rule`),
    }),
  );
  const s = obj(j.summary, 'summary');
  return {
    formatVersion: 1,
    generatedAt: text(j.generated_at, 'generated_at'),
    // The owner only a shard's report names (in its shard block): what report merge needs.
    target: {
      url: text(t.url, 'target.url'),
      credential: t.credential as Plan['target']['credential'],
      projects: list(t.projects, 'target.projects') as string[],
      owner: typeof shardBlock?.owner === 'string' ? shardBlock.owner : '',
      envs: list(t.environments, 'target.environments') as string[],
    },
    items,
    ignored,
    summary: {
      ...(s as unknown as DriftReport['summary']),
      ignoredFields: Number(s.ignored_fields),
      byEnv: obj(s.by_environment, 'summary.by_environment') as DriftReport['summary']['byEnv'],
    },
    ignore: {
      source: (ignore.source ?? null) as string | null,
      rules: Number(ignore.rules),
      unused: list(ignore.unused, 'ignore.unused') as string[],
    },
    warnings: list(j.warnings, 'warnings') as string[],
    ...(Array.isArray(j.usage_windows)
      ? {
          usageWindows: (j.usage_windows as Json[]).map((w) => ({
            projectEnv: w.project_env as string,
            logsSampled: Number(w.logs_sampled),
            oldest: w.oldest as string | null,
            newest: w.newest as string | null,
            complete: w.complete === true,
          })),
        }
      : {}),
    ...(shard ? { shard } : {}),
  };
}
