// The contract between the plan engine (../diff.ts) and the kinds it plans, one file each (decK's
// `types/<kind>.go` differs, Terraform's per-resource units): what a kind's planner receives (the
// desired and live state, the configuration's owner id and the plan's options) and where it puts
// what it finds (operations, unmanaged resources, warnings). The engine orders the kinds, filters
// what is out of scope, and sorts and summarizes the result; a kind knows nothing of the others.
// Here too: the ownership rules every kind with metadata shares.
import type {
  DesiredClient,
  DesiredState,
  JsonObject,
  JsonValue,
  LiveClient,
  LiveState,
  ResourceKind,
} from '../../model/index.js';
import { actingOwnership, appliedDigest, driftOrigin, type Ownership } from '../../model/ownership.js';
import type { FieldChange, Operation, UnmanagedResource } from '../types.js';
import type { KeptMatch } from './identity-index.js';

/** What every kind's planner receives besides the desired and live state, and where it reports. */
export interface PlanContext {
  /** Owner id of this configuration: what it creates carries it; it deletes only what carries it. */
  readonly owner: string;
  readonly options: { readonly prune: boolean; readonly takeOwnership: boolean };
  /** Addresses two or more live resources share: reported once by the engine, left alone by the kinds. */
  readonly duplicates: ReadonlySet<string>;
  /** Who owns a live resource, as this plan sees it (`--take-ownership` claims another configuration's; `held`: its inventory holds it). */
  own(metadata: JsonObject | undefined, held?: boolean): Ownership;
  readonly ops: Operation[];
  readonly unmanaged: UnmanagedResource[];
  readonly warnings: string[];
  /**
   * The digest of the fields last applied to a project, environment or template, from the
   * configuration's inventory (plan/inventory.ts); undefined when none is recorded.
   */
  applied?(address: string): string | undefined;
  /** The clients' match the diff made of the lists it was given, for the key assessment (identity-index.ts keepMatch). */
  clientMatch?: KeptMatch<DesiredClient, LiveClient>;
}

/** One kind's plan unit, as the engine's registry (./index.ts) lists it. */
export interface KindPlanner {
  /** The kinds of the operations it plans (a client's keys are planned with their client). */
  readonly kinds: readonly ResourceKind[];
  /** Diffs the desired resources of its kind against the live ones (both in scope), into `ctx`. */
  plan(desired: DesiredState, live: LiveState, ctx: PlanContext): void;
}

/** The plan's view of ownership: the rule book both engines share (model/ownership.ts), with `--take-ownership`. */
export function planOwnership(
  owner: string,
  takeOwnership: boolean,
): (metadata: JsonObject | undefined, held?: boolean) => Ownership {
  return (metadata, held) => actingOwnership(metadata, owner, takeOwnership, held);
}

// Metadata an existing resource should have, and its protection: one rule book for plan and provider.
export { isProtectedLive, markerRemovedReason, targetMetadata } from '../../model/ownership.js';

/** A resource another configuration owns that this one names: kept, with what it wanted changed (`blocked`). */
export function ownedElsewhere(
  address: string,
  kind: ResourceKind,
  projectEnv: string,
  owner: string,
  blocked: string[],
): UnmanagedResource {
  return {
    address,
    kind,
    projectEnv,
    owner,
    note: blocked.length
      ? `owned by configuration '${owner}'; this configuration's changes (${blocked.join(', ')}) are blocked (--take-ownership to manage it from this configuration)`
      : `owned by configuration '${owner}'; not changed here (--take-ownership to manage it from this configuration)`,
    ...(blocked.length ? { blocked } : {}),
  };
}

/**
 * Where the difference of a kind without metadata comes from, judged against the digest its
 * inventory recorded when it was last applied (nothing recorded: nothing said, as before).
 */
export function recordedDrift(
  ctx: PlanContext,
  addr: string,
  desired: Record<string, JsonValue | undefined>,
  live: Record<string, JsonValue | undefined>,
): { drift?: Operation['drift'] } {
  const recorded = ctx.applied?.(addr);
  return recorded === undefined ? {} : { drift: driftOrigin(recorded, appliedDigest(desired), appliedDigest(live)) };
}

/** The reason of an update: the top-level fields it changes. */
export function changedReason(changes: FieldChange[]): string {
  return `${[...new Set(changes.map((x) => x.path.split('.')[0]))].join(', ')} changed`;
}

/** The reason of an update that claims a resource kms-sync created before owners were recorded. */
export function claimReason(changes: FieldChange[]): string {
  const other = [...new Set(changes.map((x) => x.path.split('.')[0]).filter((p) => p !== 'metadata'))];
  return `claimed by this configuration (created by kms-sync before owners were recorded)${other.length ? `; ${other.join(', ')} changed` : ''}`;
}
