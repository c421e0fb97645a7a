// Machine-readable plan, shaped like Terraform's `resource_changes` (schemas/kms-sync-plan.schema.json).
import { describeSecurityChange, type Action, type Plan } from '../plan/types.js';

// 1.1: snake_case names beside the camelCase ones 1.0 had (options.take_ownership, unmanaged[].project_env).
// 1.2: security_changes (stores, recipients, owner, ${env:} reads) and summary.security_changes.
// 1.3: security_changes kinds recipient_removed, record_edited, trust_base_unreadable (with detail); trust_base.
// 1.4: security_changes kind recipient_in_edited_file.
export const PLAN_JSON_FORMAT_VERSION = '1.4';

const ACTIONS: Record<Action, string[]> = {
  create: ['create'],
  update: ['update'],
  delete: ['delete'],
  replace: ['delete', 'create'],
  rotate: ['create', 'delete'],
};

export function planToJson(plan: Plan) {
  return {
    format_version: PLAN_JSON_FORMAT_VERSION,
    generated_at: plan.generatedAt,
    target: {
      url: plan.target.url,
      credential: plan.target.credential,
      environments: plan.target.envs,
      projects: plan.target.projects,
      owner: plan.target.owner,
    },
    options: {
      ...plan.options,
      ...(plan.options.takeOwnership !== undefined ? { take_ownership: plan.options.takeOwnership } : {}),
    },
    resource_changes: plan.operations.map((op) => ({
      address: op.address,
      type: `kms_${op.kind}`,
      project_env: op.projectEnv ?? null,
      change: {
        actions: ACTIONS[op.action],
        action: op.action,
        before: op.before,
        after: op.after,
        action_reason: op.actionReason,
        reason: op.reason,
        fields: op.changes,
      },
    })),
    unmanaged: plan.unmanaged.map((u) => ({ ...u, project_env: u.projectEnv })),
    key_findings: plan.keyFindings.map((f) => ({
      address: f.address,
      project_env: f.projectEnv,
      finding: f.finding,
      expires_at: f.expiresAt ?? null,
      detail: f.detail,
      rotation_planned: f.rotationPlanned,
    })),
    warnings: plan.warnings,
    security_changes: (plan.security ?? []).map((c) => ({
      kind: c.kind,
      ...(c.store !== undefined ? { store: c.store } : {}),
      value: c.value,
      ...(c.before !== undefined ? { before: c.before } : {}),
      ...(c.holds !== undefined ? { holds: c.holds } : {}),
      ...(c.detail !== undefined ? { detail: c.detail } : {}),
      description: describeSecurityChange(c),
    })),
    ...(plan.trustBase ? { trust_base: plan.trustBase } : {}),
    summary: { ...plan.summary, changes: plan.operations.length, security_changes: plan.security?.length ?? 0 },
    // A shard's plan (--shard) carries what `kms-sync report merge` needs to make the plan of the
    // whole from the shards' JSON: the order of its warnings, and what the report shows of each
    // operation beyond resource_changes. A plan of the whole has no such block.
    ...(plan.shard
      ? {
          shard: {
            index: plan.shard.index + 1,
            count: plan.shard.count,
            files: plan.shard.files,
            warning_order: plan.shard.warningOrder,
            operations: plan.operations.map((op) => ({
              ...(op.project !== undefined ? { project: op.project } : {}),
              ...(op.protected ? { protected: true } : {}),
              ...(op.issuesKeys !== undefined ? { issues_keys: op.issuesKeys } : {}),
              ...(op.drift ? { drift: op.drift } : {}),
              ...(op.live ? { live: op.live } : {}),
            })),
          },
        }
      : {}),
  };
}

export function renderPlanJson(plan: Plan): string {
  return JSON.stringify(planToJson(plan), null, 2) + '\n';
}
