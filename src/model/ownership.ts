// Who owns a live resource (DESIGN.md "Ownership"): the markers kms-sync writes into the metadata
// of what it creates (clients, endpoints), and how a configuration reads them. Shared by the
// reconciler (plan/) and the Terraform provider (provider/), so both read each other's resources.
import { createHash } from 'node:crypto';
import { OWNER_MARKER_KEY, OWNER_MARKER_VALUE } from './identity.js';
import { canonicalJson } from './normalize.js';
import type { DesiredClient, DesiredEndpoint, JsonObject, JsonValue, LiveClient, LiveEndpoint } from './resources.js';

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
export function driftOrigin(
  recorded: JsonValue | undefined,
  desired: string,
  live: string,
): 'outside' | 'pending' | 'both' {
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
export type Ownership =
  | { kind: 'ours'; markerRemoved?: true }
  | { kind: 'legacy' }
  | { kind: 'other'; owner: string }
  | { kind: 'none' };

/**
 * `held`: the configuration's inventory (the ids it created or claimed, kept where its run keeps
 * state) holds the resource. Markers can be stripped by anyone with the service's API (a metadata
 * PUT that replaces the map): a held resource without them is still ours, with `markerRemoved`,
 * so that the plan restores them and reports it instead of ending its management silently. A
 * marker naming another configuration wins over the inventory (it was handed over on purpose).
 */
export function ownershipOf(metadata: JsonObject | undefined, owner: string, held = false): Ownership {
  if (metadata?.[OWNER_MARKER_KEY] !== OWNER_MARKER_VALUE)
    return held ? { kind: 'ours', markerRemoved: true } : { kind: 'none' };
  const id = metadata[OWNER_ID_KEY];
  if (typeof id !== 'string' || id === '') return held ? { kind: 'ours', markerRemoved: true } : { kind: 'legacy' };
  return id === owner ? { kind: 'ours' } : { kind: 'other', owner: id };
}

/**
 * Whether ownershipOf's answer for `metadata` depends on `held`: only without an owner id in the
 * marker (a marker naming a configuration decides alone), so only such resources need be looked
 * up in an inventory.
 */
export function ownershipAsksHeld(metadata: JsonObject | undefined): boolean {
  if (metadata?.[OWNER_MARKER_KEY] !== OWNER_MARKER_VALUE) return true;
  const id = metadata[OWNER_ID_KEY];
  return typeof id !== 'string' || id === '';
}

/** The reason of an update that restores the ownership markers someone removed (and what else it changes). */
export function markerRemovedReason(changedFields: readonly string[]): string {
  const other = [...new Set(changedFields.map((p) => p.split('.')[0]!))].filter((p) => p !== 'metadata');
  return `ownership marker removed outside kms-sync (this configuration's inventory holds it); restored${other.length ? `; ${other.join(', ')} changed` : ''}`;
}

/** Metadata kms-sync writes on create: the desired map plus the ownership (and protection) markers. */
export function managedMetadata(
  metadata: JsonObject | undefined,
  isProtected: boolean | undefined,
  owner: string,
  applied?: string,
): JsonObject {
  return {
    ...(metadata ?? {}),
    [OWNER_MARKER_KEY]: OWNER_MARKER_VALUE,
    [OWNER_ID_KEY]: owner,
    ...(applied !== undefined ? { [APPLIED_KEY]: applied } : {}),
    ...(isProtected ? { [PROTECTED_MARKER_KEY]: 'true' } : {}),
  };
}

export function withoutMarkers(metadata: JsonObject | undefined): JsonObject {
  const {
    [OWNER_MARKER_KEY]: _o,
    [OWNER_ID_KEY]: _i,
    [PROTECTED_MARKER_KEY]: _p,
    [APPLIED_KEY]: _a,
    ...rest
  } = metadata ?? {};
  return rest;
}

/**
 * The ownership a configuration acts on: with take-ownership (`--take-ownership`, the provider's
 * `take_ownership`), another configuration's resource is claimed like a legacy one.
 */
export function actingOwnership(
  metadata: JsonObject | undefined,
  owner: string,
  takeOwnership?: boolean,
  held = false,
): Ownership {
  const o = ownershipOf(metadata, owner, held);
  return o.kind === 'other' && takeOwnership ? { kind: 'legacy' } : o;
}

/** Only another configuration's resource is off limits: ours, legacy (claimed) and unmarked (adopted) ones change. */
export const mayChange = (o: Ownership): o is Exclude<Ownership, { kind: 'other' }> => o.kind !== 'other';

export const isProtectedLive = (metadata: JsonObject | undefined) => metadata?.[PROTECTED_MARKER_KEY] === 'true';

/**
 * Metadata an existing resource should have. The ownership markers are kept as found on a
 * resource someone else made (adopting it does not stamp it); a resource kms-sync created is (or
 * becomes, for a legacy one) ours. Metadata left out of the desired state is not managed, but the
 * protection marker always follows `protected`.
 */
export function targetMetadata(
  desired: JsonObject | undefined,
  isProtected: boolean | undefined,
  live: JsonObject,
  owner: string,
  applied?: string,
  held = false,
): JsonObject {
  const out: JsonObject = { ...(desired ?? withoutMarkers(live)) };
  if (ownershipOf(live, owner, held).kind !== 'none') {
    out[OWNER_MARKER_KEY] = OWNER_MARKER_VALUE;
    out[OWNER_ID_KEY] = owner;
    // The digest of what is applied: computed only for a resource that changes (`applied`).
    const record = applied ?? live[APPLIED_KEY];
    if (record !== undefined) out[APPLIED_KEY] = record;
  }
  if (isProtected) out[PROTECTED_MARKER_KEY] = 'true';
  return out;
}

// ---------------------------------------------------------------- per kind: what the digest covers
// The fields of a resource its configuration manages, desired (no live object) or live: what the
// applied digest covers. Both engines compute the digest with these, so drift reads either's.

/** The managed fields of a client. */
export function clientRecord(
  c: Pick<DesiredClient, 'type' | 'template' | 'ipWhitelist' | 'metadata'>,
  lc?: LiveClient,
): Record<string, JsonValue | undefined> {
  // Read only (compared, digested): a configured list may be shared between clients (config/load.ts).
  if (!lc) return { type: c.type, template: c.template, ipWhitelist: c.ipWhitelist as string[], metadata: c.metadata };
  return {
    type: c.type !== undefined ? (lc.type ?? null) : undefined,
    template: lc.templateName ?? lc.templateId ?? null,
    // Read only (compared, digested): the live list is frozen and shared between clients (live/read.ts).
    ipWhitelist: c.ipWhitelist !== undefined ? (lc.ipWhitelist as string[]) : undefined,
    metadata: c.metadata !== undefined ? withoutMarkers(lc.metadata) : undefined,
  };
}

/** The managed fields of an endpoint. */
export function endpointRecord(
  e: Pick<DesiredEndpoint, 'name' | 'description' | 'request' | 'response' | 'metadata'>,
  le?: LiveEndpoint,
): Record<string, JsonValue | undefined> {
  if (!le)
    return { name: e.name, description: e.description, request: e.request, response: e.response, metadata: e.metadata };
  const pick = <T extends JsonValue | undefined>(declared: unknown, v: T) =>
    declared !== undefined ? (v ?? null) : undefined;
  return {
    name: pick(e.name, le.name),
    description: pick(e.description, le.description),
    request: pick(e.request, le.request),
    response: pick(e.response, le.response),
    metadata: e.metadata !== undefined ? withoutMarkers(le.metadata) : undefined,
  };
}

/** Keys of a client are managed (created, rotated, revoked) when the client is ours or being claimed. */
export const isManagedBy = (metadata: JsonObject | undefined, owner: string, held = false) => {
  const k = ownershipOf(metadata, owner, held).kind;
  return k === 'ours' || k === 'legacy';
};

// ---------------------------------------------------------------- objects without metadata
// Environments and templates carry no metadata: whose one is follows from what holds or uses it
// (the clients and endpoints of an environment, the clients of a template).

/** A live object with metadata that holds (or uses) another: its address, for messages. */
export interface Holding {
  address: string;
  metadata: JsonObject | undefined;
  /** The configuration's inventory holds it (ownershipOf's `held`). */
  held?: boolean;
}

/**
 * Whose an object without metadata is, judged by what it holds or what uses it. `shared`: another
 * configuration's objects hold or use it, and this configuration's too (a template both use).
 */
export type ContentOwnership =
  | { kind: 'ours' }
  | { kind: 'other'; owner: string; address: string; shared: boolean }
  | { kind: 'unknown' };

/**
 * Another configuration's as soon as one of that configuration's objects holds or uses it (unless
 * take-ownership claims it); this configuration's when at least one of its own does and nothing of
 * another's; nobody's known otherwise (nothing, or only objects made by hand or by the SDK).
 */
export function ownershipByContents(
  holdings: Iterable<Holding>,
  owner: string,
  takeOwnership = false,
): ContentOwnership {
  let ours = false;
  let other: { owner: string; address: string } | undefined;
  for (const h of holdings) {
    const o = actingOwnership(h.metadata, owner, takeOwnership, h.held);
    if (o.kind === 'other') other ??= { owner: o.owner, address: h.address };
    if (o.kind === 'ours') ours = true;
  }
  if (other) return { kind: 'other', ...other, shared: ours };
  return ours ? { kind: 'ours' } : { kind: 'unknown' };
}

/**
 * May this configuration change (update, delete) an object without metadata that it tracks? Not
 * when it is another configuration's alone; one both use (shared) changes. A create is stricter:
 * any other configuration's object in it refuses the create (Engine.checkContents).
 */
export const othersAlone = (o: ContentOwnership): o is Extract<ContentOwnership, { kind: 'other' }> =>
  o.kind === 'other' && !o.shared;
