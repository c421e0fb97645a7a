// The plan is data (DESIGN.md "Plans"): ordered operations with before/after, field-level diffs
// and a reason. Every renderer (text, JSON, Markdown) and `apply` read this one object.
import type { ResourceKind, StoreDeclaration } from '../model/index.js';

export type Action = 'create' | 'update' | 'delete' | 'replace' | 'rotate';

/** Machine-readable reasons, shaped like Terraform's `action_reason`. */
export type ActionReason =
  | 'create_missing'
  | 'update_changed'
  | 'delete_removed_from_config'
  | 'delete_unmanaged_prune'
  | 'delete_rotated_out'
  | 'expire_rotated_out'
  | 'replace_immutable_field'
  | 'rotate_expiring'
  | 'rotate_forced'
  | 'rotate_secret_missing'
  | 'reissue_lost_key'
  | 'revoke_orphan';

export interface FieldChange {
  path: string;
  before: unknown;
  after: unknown;
}

/** Desired attributes of a key, as apply needs them. */
export interface KeyAfter {
  name: string;
  expiresAt?: string;
  ttl?: string;
  autoRotate?: boolean;
  /** Rotation window and overlap, as configured (shown in plans; apply does not send them). */
  rotation?: { window?: string; overlap?: string };
  /** Where the raw value goes: a named store (or the default) and the secret's logical name. */
  secret: { store?: string; name: string };
}

export interface Operation {
  address: string;
  kind: ResourceKind;
  action: Action;
  /** Environment the operation touches (absent for project-level operations). */
  projectEnv?: string;
  project?: string;
  reason: string;
  actionReason: ActionReason;
  before: Record<string, unknown> | null;
  after: Record<string, unknown> | null;
  changes: FieldChange[];
  /** Live identifiers apply needs; never shown as changes. */
  live?: {
    id?: string;
    clientId?: string;
    keyId?: string;
    envId?: string;
    /** Key operations: every key id the client had when read (a lost response is judged against it). */
    clientKeyIds?: string[];
  };
  /** Keys issued by this operation (client creates carry their keys). */
  issuesKeys?: number;
  /** Resource is protected: the plan refuses to delete or replace it. */
  protected?: boolean;
  /**
   * For updates and replaces of resources that record what was last applied: whether the live
   * object moved since (outside), the configuration changed since (pending), or both.
   */
  drift?: 'outside' | 'pending' | 'both';
}

export interface UnmanagedResource {
  address: string;
  kind: ResourceKind;
  projectEnv: string;
  /** Owner id of another configuration that owns it (never touched by this one). */
  owner?: string;
  /** Why it is kept, or why it will be deleted (with --prune). */
  note: string;
  /**
   * Fields this configuration wants changed on a resource another configuration owns: the plan
   * cannot make them, so it is never "No changes" (plans and applies stop with exit 1).
   */
  blocked?: string[];
}

/** The resources whose desired changes another owner blocks. */
export function blockedChanges(plan: Pick<Plan, 'unmanaged'>): UnmanagedResource[] {
  return plan.unmanaged.filter((u) => u.blocked !== undefined && u.blocked.length > 0);
}

/** The error for a plan with blocked changes: what is blocked, by whom, and the two ways out. */
export function describeBlocked(plan: Pick<Plan, 'unmanaged' | 'target'>): string | undefined {
  const blocked = blockedChanges(plan);
  if (blocked.length === 0) return undefined;
  const owners = [...new Set(blocked.map((b) => b.owner ?? '?'))];
  const shown = blocked.slice(0, 5).map((b) => `${b.address} (${b.blocked!.join(', ')}) is owned by configuration '${b.owner}'`).join('; ');
  return `${blocked.length} resource(s) this configuration wants to change belong to another configuration: ${shown}${blocked.length > 5 ? ` and ${blocked.length - 5} more` : ''}. ` +
    `If ${owners.length === 1 ? `'${owners[0]}' is` : 'one of those is'} this configuration's earlier owner id, declare it (owner: ...); ` +
    `to manage them from '${plan.target.owner}' instead, plan with --take-ownership`;
}

/** Health of a managed key, found while planning (drift reports list these). */
export interface KeyFinding {
  address: string;
  projectEnv: string;
  /** secret_missing: its secret is not in its store; expiring: inside the rotation window; expired. */
  finding: 'secret_missing' | 'expiring' | 'expired';
  expiresAt?: string | null;
  detail: string;
  /** Whether the plan rotates the key because of it (autoRotate/ttl keys, or a missing secret). */
  rotationPlanned: boolean;
}

export interface PlanSummary {
  create: number;
  update: number;
  delete: number;
  replace: number;
  rotate: number;
  unmanaged: number;
}

export interface Plan {
  formatVersion: 1;
  generatedAt: string;
  target: {
    url: string;
    /** From the credential's prefix: sk_live_ → live, sk_test_ → test. The key itself is never kept. */
    credential: 'live' | 'test' | 'unknown';
    envs: string[];
    projects: string[];
    /** Owner id of the configuration: what it creates carries it; it deletes only what carries it. */
    owner: string;
  };
  options: { prune: boolean; takeOwnership?: boolean };
  operations: Operation[];
  unmanaged: UnmanagedResource[];
  keyFindings: KeyFinding[];
  warnings: string[];
  summary: PlanSummary;
  /** Secret stores the plan's keys go to (URIs without credentials). */
  stores: StoreDeclaration[];
  /** Hash of every live object read; a saved plan refuses to apply when any has moved. */
  fingerprints: Record<string, string>;
}

export function summarize(ops: readonly Operation[], unmanaged: readonly UnmanagedResource[]): PlanSummary {
  const s: PlanSummary = { create: 0, update: 0, delete: 0, replace: 0, rotate: 0, unmanaged: unmanaged.length };
  for (const op of ops) s[op.action]++;
  return s;
}

export function hasChanges(plan: Plan): boolean {
  return plan.operations.length > 0;
}
