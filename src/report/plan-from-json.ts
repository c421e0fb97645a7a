// The plan object back from its JSON (json.ts planToJson), for `kms-sync report merge`: a shard's
// JSON plan carries, in its `shard` block, what resource_changes leaves out and the reports show.
import type {
  Action,
  ActionReason,
  FieldChange,
  KeyFinding,
  Operation,
  Plan,
  PlanShard,
  UnmanagedResource,
  WarningOrder,
} from '../plan/types.js';
import type { ResourceKind } from '../model/index.js';

/** Thrown for a file that is not a JSON plan (the message names what is wrong). */
export class PlanJsonError extends Error {}

export type Json = Record<string, unknown>;
/** The value as an object, a list or a string, or a PlanJsonError naming `what` (shared with drift-from-json.ts). */
export const obj = (v: unknown, what: string): Json => {
  if (!v || typeof v !== 'object' || Array.isArray(v)) throw new PlanJsonError(`${what} is not an object`);
  return v as Json;
};
export const list = (v: unknown, what: string): unknown[] => {
  if (!Array.isArray(v)) throw new PlanJsonError(`${what} is not a list`);
  return v;
};
export const text = (v: unknown, what: string): string => {
  if (typeof v !== 'string') throw new PlanJsonError(`${what} is not a string`);
  return v;
};

export function planFromJson(value: unknown): Plan {
  const j = obj(value, 'the plan');
  if (typeof j.format_version !== 'string' || !Array.isArray(j.resource_changes))
    throw new PlanJsonError('not a kms-sync JSON plan (kms-sync plan --json): no format_version and resource_changes');
  const t = obj(j.target, 'target');
  const shardBlock = j.shard === undefined ? undefined : obj(j.shard, 'shard');
  const extras = shardBlock ? list(shardBlock.operations, 'shard.operations') : [];
  const operations = list(j.resource_changes, 'resource_changes').map((raw, i): Operation => {
    const rc = obj(raw, `resource_changes[${i}]`);
    const change = obj(rc.change, `resource_changes[${i}].change`);
    const extra = (extras[i] ?? {}) as Json;
    const type = text(rc.type, `resource_changes[${i}].type`);
    return {
      address: text(rc.address, `resource_changes[${i}].address`),
      kind: type.replace(/^kms_/, '') as ResourceKind,
      action: change.action as Action,
      ...(typeof rc.project_env === 'string' ? { projectEnv: rc.project_env } : {}),
      ...(typeof extra.project === 'string' ? { project: extra.project } : {}),
      reason: text(change.reason, `resource_changes[${i}].change.reason`),
      actionReason: change.action_reason as ActionReason,
      before: (change.before ?? null) as Operation['before'],
      after: (change.after ?? null) as Operation['after'],
      changes: list(change.fields, `resource_changes[${i}].change.fields`) as FieldChange[],
      ...(extra.live ? { live: extra.live as Operation['live'] } : {}),
      ...(typeof extra.issues_keys === 'number' ? { issuesKeys: extra.issues_keys } : {}),
      ...(extra.protected === true ? { protected: true } : {}),
      ...(typeof extra.drift === 'string' ? { drift: extra.drift as Operation['drift'] } : {}),
    };
  });
  const unmanaged = list(j.unmanaged, 'unmanaged').map((raw) => {
    const { project_env: _pe, ...u } = obj(raw, 'unmanaged item');
    return u as unknown as UnmanagedResource;
  });
  const keyFindings = list(j.key_findings, 'key_findings').map((raw): KeyFinding => {
    const f = obj(raw, 'key finding');
    return {
      address: f.address as string,
      projectEnv: f.project_env as string,
      finding: f.finding as KeyFinding['finding'],
      ...(f.expires_at !== null && f.expires_at !== undefined ? { expiresAt: f.expires_at as string } : {}),
      detail: f.detail as string,
      rotationPlanned: f.rotation_planned === true,
    };
  });
  const options = obj(j.options, 'options');
  const s = obj(j.summary, 'summary');
  const shard: PlanShard | undefined = shardBlock
    ? {
        index: Number(shardBlock.index) - 1,
        count: Number(shardBlock.count),
        files: list(shardBlock.files ?? [], 'shard.files') as string[],
        warningOrder: list(shardBlock.warning_order, 'shard.warning_order') as WarningOrder[],
      }
    : undefined;
  return {
    formatVersion: 1,
    generatedAt: text(j.generated_at, 'generated_at'),
    target: {
      url: text(t.url, 'target.url'),
      credential: t.credential as Plan['target']['credential'],
      projects: list(t.projects, 'target.projects') as string[],
      owner: text(t.owner, 'target.owner'),
      envs: list(t.environments, 'target.environments') as string[],
    },
    options: {
      prune: options.prune === true,
      ...(typeof options.takeOwnership === 'boolean' ? { takeOwnership: options.takeOwnership } : {}),
    },
    operations,
    unmanaged,
    keyFindings,
    warnings: list(j.warnings, 'warnings') as string[],
    summary: {
      create: Number(s.create),
      update: Number(s.update),
      delete: Number(s.delete),
      replace: Number(s.replace),
      rotate: Number(s.rotate),
      unmanaged: Number(s.unmanaged),
    },
    stores: [],
    fingerprints: {},
    ...(Array.isArray(j.security_changes) && j.security_changes.length
      ? {
          security: (j.security_changes as Json[]).map(
            ({ description: _d, ...c }) => c as unknown as NonNullable<Plan['security']>[number],
          ),
        }
      : {}),
    ...(typeof j.trust_base === 'string' ? { trustBase: j.trust_base } : {}),
    ...(shard ? { shard } : {}),
  };
}
