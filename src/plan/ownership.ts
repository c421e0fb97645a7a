// Who owns a live resource (DESIGN.md "Ownership"): the markers kms-sync writes into the metadata
// of what it creates (clients, endpoints), and how a configuration reads them.
import { OWNER_MARKER_KEY, OWNER_MARKER_VALUE, type JsonObject } from '../model/index.js';

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
export function managedMetadata(metadata: JsonObject | undefined, isProtected: boolean | undefined, owner: string): JsonObject {
  return {
    ...(metadata ?? {}),
    [OWNER_MARKER_KEY]: OWNER_MARKER_VALUE,
    [OWNER_ID_KEY]: owner,
    ...(isProtected ? { [PROTECTED_MARKER_KEY]: 'true' } : {}),
  };
}

export function withoutMarkers(metadata: JsonObject | undefined): JsonObject {
  const { [OWNER_MARKER_KEY]: _o, [OWNER_ID_KEY]: _i, [PROTECTED_MARKER_KEY]: _p, ...rest } = metadata ?? {};
  return rest;
}

/** Keys of a client are managed (created, rotated, revoked) when the client is ours or being claimed. */
export const isManagedBy = (metadata: JsonObject | undefined, owner: string) => {
  const k = ownershipOf(metadata, owner).kind;
  return k === 'ours' || k === 'legacy';
};
