// The plan is data (DESIGN.md "Plans"): ordered operations with before/after, field-level diffs
// and a reason. Every renderer (text, JSON, Markdown) and `apply` read this one object.
import type { ResourceKind, StoreDeclaration } from '../model/index.js';
import { OWNER_ID_KEY } from '../model/ownership.js';

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

/**
 * An operation without its values (before, changes, and of `after` only the owner marker): what a
 * run's summary counts and names, and what the inventory needs of what it did (plan/inventory.ts
 * afterApply: live ids, the owner id written). A run over a fleet keeps these, not the operations.
 */
export function operationHeader(op: Operation): Operation {
  const { before: _before, after, changes: _changes, ...head } = op;
  const owner = (after as { metadata?: Record<string, unknown> } | null)?.metadata?.[OWNER_ID_KEY];
  return {
    ...head,
    before: null,
    after: owner === undefined ? null : { metadata: { [OWNER_ID_KEY]: owner } },
    changes: [],
  };
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
  const shown = blocked
    .slice(0, 5)
    .map((b) => `${b.address} (${b.blocked!.join(', ')}) is owned by configuration '${b.owner}'`)
    .join('; ');
  return (
    `${blocked.length} resource(s) this configuration wants to change belong to another configuration: ${shown}${blocked.length > 5 ? ` and ${blocked.length - 5} more` : ''}. ` +
    `If ${owners.length === 1 ? `'${owners[0]}' is` : 'one of those is'} this configuration's earlier owner id, declare it (owner: ...); ` +
    `to manage them from '${plan.target.owner}' instead, plan with --take-ownership`
  );
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

/**
 * A change with security weight (DESIGN.md "Trust boundary"): who can read the keys of a store,
 * where store credentials go, what the configuration reads from the environment, whose resources
 * it manages. Compared with what the store file holds now and what the last apply recorded
 * (apply/trust.ts); each one is a plan change (exit 2 with --detailed-exitcode).
 */
export interface SecurityChange {
  kind:
    | 'store_added'
    | 'store_changed'
    | 'recipient_added'
    | 'recipient_removed'
    | 'recipient_in_edited_file'
    | 'owner_changed'
    | 'env_read'
    | 'record_edited'
    | 'trust_base_unreadable';
  /** The store's name (store_added, store_changed, recipient_added). */
  store?: string;
  /**
   * store_*: its URI (without credentials) and options; recipient_*: the recipient (recipient_in_edited_file:
   * one the store file this change edits is wrapped for, which the base revision's file is not); owner_changed: the
   * owner; env_read: the variable's name; record_edited: the record's path (this change edits it);
   * trust_base_unreadable: the git revision whose records could not be read.
   */
  value: string;
  /** What it was: store_changed, the URI and options before; owner_changed, the owner the last apply recorded. */
  before?: string;
  /**
   * recipient_added: the secrets the store holds now, which the recipient could then decrypt (apply
   * refuses unless allowed when > 0); recipient_removed: the secrets issued before, which it could
   * decrypt with the old data key (apply re-keys the file; rotate them); recipient_in_edited_file: the
   * secrets the file holds now.
   */
  holds?: number;
  /** trust_base_unreadable: why (a shallow clone, an unknown revision). */
  detail?: string;
  /** store_added, store_changed: the recipients the declaration names, sorted (also inside `value`'s options). */
  recipients?: string[];
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
  /** Changes with security weight (stores, recipients, owner, `${env:}` reads): shown, counted, and for recipients gated by apply. */
  security?: SecurityChange[];
  /** The git revision the security changes were compared with (`--trust-base`: a pull request's base), as `REF (commit)`. */
  trustBase?: string;
  /** The variables the configuration read with `${env:}` (recorded by apply beside the stores). */
  envReferences?: string[];
  /** A shard's plan (`--shard`): what `kms-sync report merge` needs to join the shards into the plan of the whole. */
  shard?: PlanShard;
}

/** One line per security change, for text and Markdown. */
export function describeSecurityChange(c: SecurityChange): string {
  switch (c.kind) {
    case 'store_added':
      return `store ${c.store}: new (${c.value})`;
    case 'store_changed':
      return `store ${c.store}: changed from ${c.before ?? '?'} to ${c.value}`;
    case 'recipient_added':
      return (
        `store ${c.store}: + recipient ${c.value}` +
        (c.holds
          ? ` (could decrypt the ${c.holds} secret(s) it holds now: apply needs --allow-new-recipients)`
          : ' (the store holds no secret yet)')
      );
    case 'recipient_removed':
      return (
        `store ${c.store}: - recipient ${c.value} (apply re-keys the store: a new data key, wrapped for the remaining recipients only` +
        (c.holds
          ? `; the removed recipient could read the ${c.holds} secret(s) issued before: rotate them with kms-sync rotate --key)`
          : ')')
      );
    case 'recipient_in_edited_file':
      return (
        `store ${c.store}: its file, edited by this change, is wrapped for ${c.value}, which the base revision's file is not ` +
        `(whoever holds it can decrypt every secret written there${c.holds ? `, and the ${c.holds} it holds now` : ''}; ` +
        'store files are written by apply, not by a change: restore the file from the base revision)'
      );
    case 'owner_changed':
      return `owner: ${c.before ?? '(none recorded)'} -> ${c.value}`;
    case 'env_read':
      return `reads the environment variable ${c.value} (\${env:${c.value}})`;
    case 'record_edited':
      if (c.value.endsWith('/journal'))
        return `${c.value}: the key journal, edited by this change (its records store keys and revoke live ones; what an interrupted run left is never a change's to write: a plan of this change does not act on it)`;
      return `${c.value}: edited by this change (the record of what the last apply saw; the security changes are compared with the base's version, not with this file)`;
    case 'trust_base_unreadable':
      return `the records of the base ${c.value} cannot be read (${c.detail ?? 'unknown reason'}): every store, recipient and \${env:} read is shown as new, not compared with the records in this checkout, which this change may have edited`;
  }
}

/** The recipients a plan would add to stores that already hold secrets (apply refuses them unless allowed). */
export function recipientsAddedToHeldKeys(plan: Plan): SecurityChange[] {
  return (plan.security ?? []).filter((c) => c.kind === 'recipient_added' && (c.holds ?? 0) > 0);
}

export interface PlanShard {
  /** 0-based. */
  index: number;
  count: number;
  /** The configuration paths as given with -f (the Markdown report's comment marker names them). */
  files: string[];
  /** The place of each warning in the whole plan's order (merge.ts). */
  warningOrder: WarningOrder[];
}

export function summarize(ops: readonly Operation[], unmanaged: readonly UnmanagedResource[]): PlanSummary {
  const s: PlanSummary = { create: 0, update: 0, delete: 0, replace: 0, rotate: 0, unmanaged: unmanaged.length };
  for (const op of ops) s[op.action]++;
  return s;
}

export function hasChanges(plan: Plan): boolean {
  return plan.operations.length > 0 || (plan.security?.length ?? 0) > 0;
}

/**
 * When a plan's warnings are made, in the order a plan of the whole configuration lists them:
 * live duplicates (templates, then clients), environments that left the configuration, each kind
 * in dependency order, key health, recovery, secret checks. Plans of parts (one environment, one
 * shard) are merged back in this order (merge.ts).
 */
export const WARNING_PHASE = {
  duplicateTemplate: 0,
  duplicateClient: 1,
  leaving: 2,
  kinds: 3,
  keys: 20,
  recovery: 21,
  secrets: 22,
  ignore: 23,
} as const;

/** A warning's place in the whole plan's order: its phase, then the environment (or project) it is about. */
export type WarningOrder = [phase: number, key: string];
