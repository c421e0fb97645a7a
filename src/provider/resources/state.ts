// Live objects → Terraform state, keeping the configuration's spelling where the service only
// normalises it (CIDR notation, method case, timestamps, markers in metadata): Terraform must see
// no change where there is none.
import { createHash } from 'node:crypto';
import { canonicalCidr, canonicalTimestamp, withoutMarkers, type JsonObject } from '../../model/index.js';
import type { TfObject, TfValue } from '../values/types.js';

/** The reconciler's metadata markers (model/ownership.ts): both engines read each other's resources. */
export { OWNER_ID_KEY, PROTECTED_MARKER_KEY } from '../../model/index.js';

/** The public part of a raw key: the service prefix and a few characters, like a project key's 12-character keyPrefix. */
export const KEY_PREFIX_LENGTH = 12;

/** sha256 of where a secret went (store, backend name): tells a move apart, reveals nothing. */
export function secretFingerprint(receipt: { store: string; secret: string }): string {
  return `sha256:${createHash('sha256').update(`${receipt.store}\n${receipt.secret}`).digest('hex').slice(0, 32)}`;
}

/** A client's id as the wire names it (`id`, or `client_uuid`). */
export const uuidOf = (c: { id?: string; client_uuid?: string }): string => (c.id ?? c.client_uuid)!;

/** The apply handlers, loaded on the first change: schema, validation and plans never need them. */
export const handlers = () => import('../../apply/kinds/index.js');

/** Metadata as the user manages it: without the markers kms-sync adds. */
export function userMetadata(metadata: Record<string, unknown> | undefined): JsonObject {
  return withoutMarkers(metadata as JsonObject | undefined);
}

const canonical = (v: unknown): string => JSON.stringify(sortKeys(v));
function sortKeys(v: unknown): unknown {
  if (Array.isArray(v)) return v.map(sortKeys);
  if (v && typeof v === 'object')
    return Object.fromEntries(
      Object.keys(v)
        .sort()
        .map((k) => [k, sortKeys((v as Record<string, unknown>)[k])]),
    );
  return v;
}

/** A free-form object attribute: the prior value when equal, null for an empty object the user never set. */
export function keepObject(prior: TfValue | undefined, live: JsonObject | undefined): TfValue {
  const value = live ?? {};
  if (prior !== undefined && prior !== null && canonical(prior) === canonical(value)) return prior;
  if ((prior === undefined || prior === null) && Object.keys(value).length === 0) return null;
  return value as TfValue;
}

function cidrKey(list: unknown[]): string {
  try {
    return [...new Set(list.map((x) => canonicalCidr(String(x))))].sort().join(',');
  } catch {
    return list.map(String).sort().join(',');
  }
}

/** An IP list: the prior spelling when it means the same ranges; null when unset and empty. */
export function keepCidrs(prior: TfValue | undefined, live: string[] | undefined): TfValue {
  const value = live ?? [];
  if (Array.isArray(prior) && cidrKey(prior) === cidrKey(value)) return prior;
  if ((prior === undefined || prior === null) && value.length === 0) return null;
  return value;
}

/**
 * A timestamp as Terraform configurations spell it (RFC 3339, `2027-01-01T00:00:00Z`, what
 * timestamp() returns): whole seconds without the `.000` the service writes, so the state of an
 * import matches a configuration written by hand or generated from it.
 */
export function configTimestamp(live: string): string {
  const ms = Date.parse(live);
  if (Number.isNaN(ms)) return live;
  const iso = new Date(ms).toISOString();
  return ms % 1000 === 0 ? iso.replace('.000Z', 'Z') : iso;
}

/** Both sides the same instant, however spelled (`…00Z`, `…00.000Z`, `+00:00`). */
export function sameInstant(a: TfValue | undefined, b: TfValue | undefined): boolean {
  if (typeof a !== 'string' || typeof b !== 'string') return a === b;
  try {
    return canonicalTimestamp(a) === canonicalTimestamp(b);
  } catch {
    return a === b;
  }
}

/** The prior spelling when it is the same instant as the live value, else the live value spelled as configurations do. */
export function keepTimestamp(prior: TfValue | undefined, live: string | null | undefined): TfValue {
  if (live === undefined || live === null) return null;
  if (typeof prior === 'string') {
    try {
      if (canonicalTimestamp(prior) === canonicalTimestamp(live)) return prior;
    } catch {
      // not a timestamp: take the live value
    }
  }
  return configTimestamp(live);
}

/** An optional attribute the user may leave out: unset stays unset while the live value is the service default. */
export function keepOptional<T extends TfValue>(
  prior: TfValue | undefined,
  live: T | undefined,
  serviceDefault: T,
): TfValue {
  if ((prior === undefined || prior === null) && (live === undefined || live === serviceDefault)) return null;
  return live ?? null;
}

export const orNull = (v: unknown): TfValue => (v === undefined ? null : (v as TfValue));

export function withDefaults(schemaAttrs: string[], values: TfObject): TfObject {
  return Object.fromEntries(schemaAttrs.map((a) => [a, values[a] ?? null]));
}
