// Machine-readable drift report (schemas/kms-sync-drift.schema.json).
import type { DriftCounts, DriftItem, DriftReport, IgnoredDriftItem } from '../plan/drift.js';
import { safeUrl } from './redact.js';

export const DRIFT_JSON_FORMAT_VERSION = '1.0';

const counts = (c: DriftCounts) => ({
  total: c.total,
  changed_outside: c.changed_outside,
  pending: c.pending,
  missing: c.missing,
  unmanaged: c.unmanaged,
  secret_missing: c.secret_missing,
  expiring: c.expiring,
});

function item(i: DriftItem) {
  return {
    category: i.category,
    address: i.address,
    type: `kms_${i.kind}`,
    project_env: i.projectEnv,
    detail: i.detail,
    planned_action: i.action,
    fields: i.fields.map((f) => ({ path: f.path, live: f.before ?? null, desired: f.after ?? null })),
    ignored_fields: i.ignoredFields,
    ...(i.usage
      ? {
          usage: {
            ...(i.usage.endpointStats ? { endpoint_stats: i.usage.endpointStats } : {}),
            ...(i.usage.recent
              ? {
                  recent: {
                    calls: i.usage.recent.calls,
                    errors: i.usage.recent.errors,
                    error_rate: i.usage.recent.errorRate,
                    last_seen: i.usage.recent.lastSeen,
                  },
                }
              : {}),
          },
        }
      : {}),
  };
}

export function driftToJson(report: DriftReport) {
  return {
    format_version: DRIFT_JSON_FORMAT_VERSION,
    kind: 'kms-sync/drift',
    generated_at: report.generatedAt,
    target: {
      url: safeUrl(report.target.url),
      credential: report.target.credential,
      environments: report.target.envs,
      projects: report.target.projects,
    },
    drift: report.items.length > 0,
    summary: {
      ...counts(report.summary),
      ignored: report.summary.ignored,
      ignored_fields: report.summary.ignoredFields,
      by_environment: Object.fromEntries(
        Object.entries(report.summary.byEnv)
          .sort(([a], [b]) => (a < b ? -1 : 1))
          .map(([env, c]) => [env, counts(c)]),
      ),
    },
    items: report.items.map(item),
    ignored: report.ignored.map((i: IgnoredDriftItem) => ({ ...item(i), rule: i.rule })),
    ignore: report.ignore,
    ...(report.usageWindows
      ? {
          usage_windows: report.usageWindows.map((w) => ({
            project_env: w.projectEnv,
            logs_sampled: w.logsSampled,
            oldest: w.oldest,
            newest: w.newest,
            complete: w.complete,
          })),
        }
      : {}),
    warnings: report.warnings,
    // A shard's report (drift --shard): what `kms-sync report merge` needs to join the shards' reports
    // (the order of its warnings in the whole's, and the owner the text and Markdown headers show).
    // A report of the whole has no such block.
    ...(report.shard
      ? {
          shard: {
            index: report.shard.index + 1,
            count: report.shard.count,
            files: report.shard.files,
            owner: report.target.owner,
            warning_order: report.shard.warningOrder,
          },
        }
      : {}),
  };
}

export function renderDriftJson(report: DriftReport): string {
  return JSON.stringify(driftToJson(report), null, 2) + '\n';
}
