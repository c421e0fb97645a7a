// What a run may delete, for every front end (DESIGN.md "Ownership and deletes"). Two rules, over
// the deletes a plan has because something left the configuration or is unmanaged (never the
// clean-ups of a rotation or of a recovery, which keep one live key per held raw value):
// - pruning (Flux's `prune`): a front end that does not prune (the agent without --prune) deletes
//   nothing that left the configuration; those resources are reported as "requires pruning";
// - the deletion guard: a plan that would delete or revoke more than `maxDeletes` resources, or
//   any key of a protected client, is held: applied without its deletes, reported, until approved
//   (a flag, an annotation in the commit, the agent's API). One `git rm -r` must not revoke every
//   partner's credentials, which re-creating would not give back (new keys).
import type { LiveState } from '../model/index.js';
import { isProtectedLive } from '../model/ownership.js';
import { summarize, type ActionReason, type Operation, type Plan } from './types.js';

/** Deletes a plan has because a resource left the configuration, or is unmanaged and pruned. */
const REMOVAL: ReadonlySet<ActionReason> = new Set(['delete_removed_from_config', 'delete_unmanaged_prune']);

export const DEFAULT_MAX_DELETES = 10;

export const isRemoval = (op: Operation) => op.action === 'delete' && REMOVAL.has(op.actionReason);

export interface DeletePolicy {
  /** Delete what this configuration owns and that left it (the CLI: always, as Terraform; the agent: with --prune). */
  pruneRemoved: boolean;
  /** More removals than this are held (Infinity: no guard). */
  maxDeletes: number;
  /** The held removals are approved for this run. */
  approved?: boolean;
  /** The live state the plan was made from: a revoked key of a client marked protected there is held too. */
  live?: LiveState;
}

export interface GuardedPlan {
  /** The plan to apply: without what is held and what requires pruning. */
  plan: Plan;
  /** Left the configuration, not deleted because the front end does not prune. */
  requiresPruning: Operation[];
  /** Held by the guard until approved. */
  held: Operation[];
  /** Why they are held (undefined: nothing held). */
  heldReason?: string;
}

/** A plan's removals under a policy: what requires pruning, what would be deleted, and which of those revoke a protected client's key. */
export function tallyRemovals(
  plan: Pick<Plan, 'operations'>,
  p: Pick<DeletePolicy, 'pruneRemoved' | 'live'>,
): { requiresPruning: Operation[]; deleting: Operation[]; ofProtected: Operation[] } {
  const removals = plan.operations.filter(isRemoval);
  const requiresPruning = p.pruneRemoved
    ? []
    : removals.filter((op) => op.actionReason === 'delete_removed_from_config');
  const pruned = new Set(requiresPruning);
  const deleting = removals.filter((op) => !pruned.has(op));
  // The live clients are looked at only when a key is revoked: a plan that deletes none (most
  // applies) does not walk an environment's every client's metadata.
  const revokes = deleting.filter((op) => op.kind === 'key' && op.live?.clientId !== undefined);
  const protectedClients = new Set(
    revokes.length ? (p.live?.clients ?? []).filter((c) => isProtectedLive(c.metadata)).map((c) => c.id) : [],
  );
  const ofProtected = revokes.filter((op) => protectedClients.has(op.live!.clientId!));
  return { requiresPruning, deleting, ofProtected };
}

/**
 * Why the guard holds a run's removals (undefined: it does not), from their count and the
 * addresses of the protected clients' keys among them: over one plan, or over a whole fleet
 * applied environment by environment (engine/stream-apply.ts).
 */
export function heldReason(
  deleting: number,
  ofProtected: readonly string[],
  p: Pick<DeletePolicy, 'maxDeletes' | 'approved'>,
): string | undefined {
  if (p.approved) return undefined;
  if (deleting > p.maxDeletes)
    return `${deleting} deletes or revokes exceed the deletion guard (at most ${p.maxDeletes} at once)`;
  if (ofProtected.length > 0)
    return `${ofProtected.length} key(s) of a protected client would be revoked (${ofProtected.slice(0, 3).join(', ')})`;
  return undefined;
}

/** The plan without some of its operations, its summary counted again. */
export function withoutOperations(plan: Plan, out: ReadonlySet<Operation>): Plan {
  if (out.size === 0) return plan;
  const operations = plan.operations.filter((op) => !out.has(op));
  return { ...plan, operations, summary: summarize(operations, plan.unmanaged) };
}

/** Splits a plan's removals into what may run now, what requires pruning, and what the guard holds. */
export function guardDeletes(plan: Plan, p: DeletePolicy): GuardedPlan {
  const { requiresPruning, deleting, ofProtected } = tallyRemovals(plan, p);
  const reason = heldReason(
    deleting.length,
    ofProtected.map((o) => o.address),
    p,
  );
  const held = reason ? deleting : [];
  const out = new Set([...requiresPruning, ...held]);
  if (out.size === 0) return { plan, requiresPruning, held };
  return {
    plan: withoutOperations(plan, out),
    requiresPruning,
    held,
    ...(reason ? { heldReason: reason } : {}),
  };
}
