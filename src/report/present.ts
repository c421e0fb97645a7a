// What people see of a plan in text and Markdown (JSON keeps everything): kms-sync's own metadata
// markers (managed-by, the owner id, the applied digest, the protection marker) are hidden, and a
// key is described by its lifetime and rotation settings.
import { APPLIED_KEY, OWNER_ID_KEY, PROTECTED_MARKER_KEY, withoutMarkers } from '../model/ownership.js';
import { OWNER_MARKER_KEY } from '../model/identity.js';
import type { JsonObject } from '../model/resources.js';
import type { FieldChange, KeyAfter, Operation } from '../plan/types.js';

const MARKERS = new Set([OWNER_MARKER_KEY, OWNER_ID_KEY, APPLIED_KEY, PROTECTED_MARKER_KEY]);

/** A resource's attributes with the markers taken out of its metadata (an empty metadata map is left out). */
export function shownAttributes(attrs: Record<string, unknown> | null): Record<string, unknown> {
  const out = { ...(attrs ?? {}) };
  if (out.metadata && typeof out.metadata === 'object') {
    const rest = withoutMarkers(out.metadata as JsonObject);
    if (Object.keys(rest).length === 0) delete out.metadata;
    else out.metadata = rest;
  }
  return out;
}

const PROTECTED_PATH = `metadata.${PROTECTED_MARKER_KEY}`;

/**
 * Field changes without those of a marker (`metadata.kms-sync/owner`, …). The protection marker is
 * what `protected` is in the service: its change is shown as one of `protected` (true/false),
 * never hidden among the markers (a change that drops `protected: true` is one to review).
 */
export function withoutMarkerFields<T extends { path: string; before?: unknown; after?: unknown }>(
  fields: readonly T[],
): T[] {
  const out: T[] = [];
  for (const c of fields) {
    if (c.path === PROTECTED_PATH)
      out.push({ ...c, path: 'protected', before: c.before === 'true', after: c.after === 'true' });
    else if (!(c.path.startsWith('metadata.') && MARKERS.has(c.path.slice('metadata.'.length)))) out.push(c);
  }
  return out;
}

/** The changes people review: a change of a marker alone is not one. */
export function shownChanges(op: Operation): { changes: FieldChange[]; markersOnly: boolean } {
  const changes = withoutMarkerFields(op.changes);
  return { changes, markersOnly: changes.length === 0 && op.changes.length > 0 };
}

export const MARKERS_ONLY_NOTE = "only kms-sync's own markers change (owner and last-applied record)";

/** "ttl 30d, autoRotate true, rotation window 7d / overlap 1d": a new key's lifetime, as configured. */
export function keyTerms(k: Pick<KeyAfter, 'ttl' | 'expiresAt' | 'autoRotate' | 'rotation'>): string {
  const parts = [
    k.ttl !== undefined ? `ttl ${k.ttl}` : k.expiresAt !== undefined ? `expires ${k.expiresAt}` : 'no expiry',
  ];
  parts.push(`autoRotate ${k.autoRotate === true}`);
  if (k.rotation?.window !== undefined || k.rotation?.overlap !== undefined) {
    parts.push(
      `rotation ${[k.rotation.window !== undefined ? `window ${k.rotation.window}` : '', k.rotation.overlap !== undefined ? `overlap ${k.rotation.overlap}` : ''].filter(Boolean).join(' / ')}`,
    );
  }
  return parts.join(', ');
}

/** The keys a client delete revokes (names; generations of one name counted). */
export function revokedKeys(op: Operation): string[] | undefined {
  if (op.kind !== 'client' || op.action !== 'delete') return undefined;
  const names = (op.before?.keys as string[] | undefined) ?? [];
  const counts = new Map<string, number>();
  for (const n of names) counts.set(n, (counts.get(n) ?? 0) + 1);
  return [...counts].map(([n, c]) => (c > 1 ? `${n} (${c} generations)` : n));
}
