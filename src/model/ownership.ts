// Who owns a live resource (DESIGN.md "Ownership"): the markers kms-sync writes into the metadata
// of what it creates (clients, endpoints), and how a configuration reads them. Shared by the
// reconciler (plan/) and the Terraform provider (provider/), so both read each other's resources.
import { createHash } from 'node:crypto';
import { OWNER_MARKER_KEY, OWNER_MARKER_VALUE } from './identity.js';
import { canonicalJson } from './normalize.js';
import type { JsonObject, JsonValue } from './resources.js';

/**
 * Metadata key holding a digest of what kms-sync last applied to a resource (the fields its
 * configuration manages), so drift can tell "changed outside" (live moved since the last apply)
 * from "pending" (the configuration changed and was not applied yet).
 */
export const APPLIED_KEY = 'kms-sync/applied';

/** Digest of the managed fields of a resource; fields left out (undefined) are not managed. */
export function appliedDigest(fields: Record<string, JsonValue | undefined>): string {
  const defined: JsonObject = {};
  for (const [k, v] of Object.entries(fields)) if (v !== undefined) defined[k] = v;
  return createHash('sha256').update(canonicalJson(defined)).digest('hex').slice(0, 16);
}

/** Where a difference comes from, judged against the digest recorded at the last apply. */
export function driftOrigin(recorded: JsonValue | undefined, desired: string, live: string): 'outside' | 'pending' | 'both' {
  if (typeof recorded !== 'string') return 'outside'; // no record (made before kms-sync recorded one)
  if (recorded === desired) return 'outside';
  return recorded === live ? 'pending' : 'both';
}

export const PROTECTED_MARKER_KEY = 'kms-sync/protected';

/** Metadata key naming the configuration that owns a resource (DESIGN.md "Ownership"). */
export const OWNER_ID_KEY = 'kms-sync/owner';

/**
 * Who owns a live resource, from this configuration's point of view:
 * - `ours`: created (or claimed) by this configuration: updated, and deleted when it leaves it;
 * - `legacy`: created by kms-sync before owners were recorded: claimed by the first
 *   configuration that names it (the plan says so), never deleted by one that does not;
 * - `other`: owned by another configuration: never touched (unless --take-ownership);
 * - `none`: made by hand or by the SDK: managed when named (adoption), deleted only with --prune.
 */
export type Ownership = { kind: 'ours' } | { kind: 'legacy' } | { kind: 'other'; owner: string } | { kind: 'none' };

export function ownershipOf(metadata: JsonObject | undefined, owner: string): Ownership {
  if (metadata?.[OWNER_MARKER_KEY] !== OWNER_MARKER_VALUE) return { kind: 'none' };
  const id = metadata[OWNER_ID_KEY];
  if (typeof id !== 'string' || id === '') return { kind: 'legacy' };
  return id === owner ? { kind: 'ours' } : { kind: 'other', owner: id };
}

/** Metadata kms-sync writes on create: the desired map plus the ownership (and protection) markers. */
export function managedMetadata(metadata: JsonObject | undefined, isProtected: boolean | undefined, owner: string, applied?: string): JsonObject {
  return {
    ...(metadata ?? {}),
    [OWNER_MARKER_KEY]: OWNER_MARKER_VALUE,
    [OWNER_ID_KEY]: owner,
    ...(applied !== undefined ? { [APPLIED_KEY]: applied } : {}),
    ...(isProtected ? { [PROTECTED_MARKER_KEY]: 'true' } : {}),
  };
}

export function withoutMarkers(metadata: JsonObject | undefined): JsonObject {
  const { [OWNER_MARKER_KEY]: _o, [OWNER_ID_KEY]: _i, [PROTECTED_MARKER_KEY]: _p, [APPLIED_KEY]: _a, ...rest } = metadata ?? {};
  return rest;
}

/** Keys of a client are managed (created, rotated, revoked) when the client is ours or being claimed. */
export const isManagedBy = (metadata: JsonObject | undefined, owner: string) => {
  const k = ownershipOf(metadata, owner).kind;
  return k === 'ours' || k === 'legacy';
};
