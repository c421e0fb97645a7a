// How the keys of a client are planned (with their client: ./client.ts calls `planKeys` for each
// client it manages or adopts): a missing key is created, a changed expiry or auto-rotation
// updated, a key the configuration dropped revoked. Rotation and missing secrets are judged
// later, against the secret stores (../key-health.ts).
import {
  address,
  defaultSecretName,
  groupBy,
  type DesiredClient,
  type DesiredKey,
  type LiveClient,
} from '../../model/index.js';
import { change } from '../compare.js';
import type { KeyAfter } from '../types.js';
import type { PlanContext } from './contract.js';

export function keyAfter(k: DesiredKey): KeyAfter {
  return {
    name: k.name,
    ...(k.expiresAt !== undefined ? { expiresAt: k.expiresAt } : {}),
    ...(k.ttl !== undefined ? { ttl: k.ttl } : {}),
    ...(k.autoRotate !== undefined ? { autoRotate: k.autoRotate } : {}),
    ...(k.rotation !== undefined ? { rotation: k.rotation } : {}),
    secret: {
      ...(k.secret?.store ? { store: k.secret.store } : {}),
      name: k.secret?.name ?? defaultSecretName(k.projectEnv, k.client, k.name),
    },
  };
}

export function keyBefore(k: { name: string; expiresAt?: string | null; autoRotate?: boolean }) {
  return { name: k.name, expiresAt: k.expiresAt ?? null, autoRotate: k.autoRotate ?? false };
}

/**
 * Keys of a live client this configuration names: create missing, update changed, and (when
 * `managed`: the client is this configuration's) revoke the ones it dropped.
 */
export function planKeys(c: DesiredClient, lc: LiveClient, ctx: PlanContext, managed: boolean): void {
  const { ops } = ctx;
  for (let i = 0; i < c.keys.length; i++) {
    const k = c.keys[i]!;
    // Live keys of this name, found without building a map per client. Several keys under one
    // name are rotation generations: the newest (last) is the current key (key-health.ts retires
    // the older ones).
    let lk: LiveClient['keys'][number] | undefined;
    for (let j = 0; j < lc.keys.length; j++) if (lc.keys[j]!.name === k.name) lk = lc.keys[j];
    if (!lk) {
      ops.push({
        address: address.key(c.projectEnv, c.name, k.name),
        kind: 'key',
        action: 'create',
        projectEnv: c.projectEnv,
        reason: 'key does not exist',
        actionReason: 'create_missing',
        before: null,
        after: keyAfter(k) as unknown as Record<string, unknown>,
        changes: [],
        live: { clientId: lc.id, clientKeyIds: lc.keys.map((x) => x.id) },
        issuesKeys: 1,
      });
      continue;
    }
    // An auto-rotated key's expiry moves with each generation: the configured one is the first.
    const expiry = k.expiresAt !== undefined && !k.autoRotate;
    if (!expiry && k.autoRotate === undefined) continue; // nothing of this key is managed
    const changes = [
      ...(expiry ? change('expiresAt', lk.expiresAt ?? null, k.expiresAt) : []),
      ...(k.autoRotate !== undefined ? change('autoRotate', lk.autoRotate ?? false, k.autoRotate) : []),
    ];
    if (changes.length) {
      ops.push({
        address: address.key(c.projectEnv, c.name, k.name),
        kind: 'key',
        action: 'update',
        projectEnv: c.projectEnv,
        reason: `${changes.map((x) => x.path).join(', ')} changed`,
        actionReason: 'update_changed',
        before: keyBefore(lk),
        after: keyAfter(k) as unknown as Record<string, unknown>,
        changes,
        live: { clientId: lc.id, keyId: lk.id, clientKeyIds: lc.keys.map((x) => x.id) },
      });
    }
  }
  if (!managed) return; // keys of an adopted client (made by hand) are never revoked by kms-sync
  if (everyLiveKeyConfigured(c, lc)) return;
  const byName = groupBy(lc.keys, (k) => k.name);
  const wanted = new Set(c.keys.map((k) => k.name));
  for (const [name, found] of byName) {
    if (wanted.has(name)) continue;
    const addr = address.key(c.projectEnv, c.name, name);
    if (c.protected) {
      ctx.warnings.push(`${addr}: not in the configuration, but its client is protected; kept`);
      continue;
    }
    for (const lk of found) {
      ops.push({
        address: addr,
        kind: 'key',
        action: 'delete',
        projectEnv: c.projectEnv,
        reason: 'not in the configuration of its client (revokes the key)',
        actionReason: 'delete_removed_from_config',
        before: keyBefore(lk),
        after: null,
        changes: [],
        live: { clientId: lc.id, keyId: lk.id },
      });
    }
  }
}

/** Every live key's name is configured (nested loops over a few keys: no closure per client). */
function everyLiveKeyConfigured(c: DesiredClient, lc: LiveClient): boolean {
  outer: for (let i = 0; i < lc.keys.length; i++) {
    for (let j = 0; j < c.keys.length; j++) if (c.keys[j]!.name === lc.keys[i]!.name) continue outer;
    return false;
  }
  return true;
}
