// Key health on top of the diff: expiry, secrets missing from their store, and rotation.
// Rotation issues a new key under the same name; older generations stay until they expire or the
// configured overlap has passed, then they are revoked (DESIGN.md "Keys", issue "Rotation").
import {
  address,
  parseTtl,
  type DesiredClient,
  type DesiredKey,
  type DesiredState,
  type LiveClient,
  type LiveKey,
  type LiveState,
} from '../model/index.js';
import { sortOperations } from './diff.js';
import { type KeptMatch, matchAgain } from './kinds/identity-index.js';
import { keyAfter } from './kinds/key.js';
import { isManagedBy, ownershipOf, PROTECTED_MARKER_KEY } from '../model/ownership.js';
import { globToRegExp } from './scope.js';
import { summarize, type KeyFinding, type Operation, type Plan } from './types.js';

export const DEFAULT_ROTATION_WINDOW_MS = 14 * 86_400_000;
/**
 * With no overlap configured, the old generation stays valid until it expires, but at most this
 * long after its replacement: its raw value is no longer held (the secret holds the new key), so a
 * key without an expiry must not stay live forever.
 */
export const DEFAULT_ROTATION_OVERLAP_MS = 7 * 86_400_000;

export interface SecretStatus {
  status: 'present' | 'missing' | 'stale' | 'unknown';
  detail?: string;
}

export interface KeyHealthInput {
  plan: Plan;
  desired: DesiredState;
  live: LiveState;
  /** Secret status by key address, for keys whose secret was checked. */
  secrets: ReadonlyMap<string, SecretStatus>;
  now: Date;
  /** The diff's match of the same clients (buildPlanPhased), used when the lists are still those it matched. */
  clientMatch?: KeptMatch<DesiredClient, LiveClient>;
  /** Address globs of keys to rotate now (`kms-sync rotate`). */
  force?: readonly string[];
  /** With force: revoke the old key as soon as the new one is stored. */
  revokeOld?: boolean;
  /**
   * Live keys whose raw value never reached us (a run died between the service creating them and
   * the journal write): the current one is re-issued, and every one is revoked after that.
   */
  orphans?: readonly {
    clientId: string;
    keyId: string;
    keyName: string;
    projectEnv: string;
    client: string;
    reason?: 'lost-response' | 'superseded';
  }[];
  /** Rotate keys whose secret kms-sync does not hold (default: report them only). */
  rotateMissingSecrets?: boolean;
}

function durationMs(text: string | undefined): number | undefined {
  if (text === undefined) return undefined;
  if (/^\s*0+[smhdw]\s*$/.test(text)) return 0;
  return parseTtl(text);
}

/** Window: the configured one, else 14 days, capped to a quarter of the key's lifetime. */
export function rotationWindowMs(k: DesiredKey, current: LiveKey): number {
  const configured = durationMs(k.rotation?.window);
  if (configured !== undefined) return configured;
  const lifetime = k.ttl
    ? parseTtl(k.ttl)
    : current.expiresAt && current.createdAt
      ? Date.parse(current.expiresAt) - Date.parse(current.createdAt)
      : undefined;
  return lifetime && lifetime > 0 ? Math.min(DEFAULT_ROTATION_WINDOW_MS, lifetime / 4) : DEFAULT_ROTATION_WINDOW_MS;
}

const days = (ms: number) =>
  ms >= 86_400_000 ? `${Math.round(ms / 86_400_000)}d` : `${Math.max(1, Math.round(ms / 3_600_000))}h`;

export function assessKeys(input: KeyHealthInput): Plan {
  const { plan, now } = input;
  const t = now.getTime();
  const ops = [...plan.operations];
  const findings: KeyFinding[] = [];
  const warnings = [...plan.warnings];
  const force = (input.force ?? []).map(globToRegExp);
  const liveClients = matchAgain(input.clientMatch, input.desired.clients, input.live.clients);
  const orphanIds = new Set((input.orphans ?? []).map((o) => o.keyId));
  const supersededIds = new Set((input.orphans ?? []).filter((o) => o.reason === 'superseded').map((o) => o.keyId));
  const checkSecrets = input.secrets.size > 0;
  const revoked = new Set<string>();
  const revokeOrphan = (addr: string, projectEnv: string, clientIdOf: string, k: LiveKey) => {
    if (revoked.has(k.id)) return;
    revoked.add(k.id);
    ops.push({
      address: addr,
      kind: 'key',
      action: 'delete',
      projectEnv,
      reason: supersededIds.has(k.id)
        ? 'pending revoke: replaced by rotate --revoke-old, whose run was interrupted before this old key was revoked (its secret holds its replacement, or will once a lost one is re-issued)'
        : 'orphan: issued by a run that was interrupted before its raw value was saved; nobody holds it, so it is revoked (after its replacement is stored)',
      actionReason: 'revoke_orphan',
      before: { name: k.name, expiresAt: k.expiresAt ?? null, autoRotate: k.autoRotate ?? false },
      after: null,
      changes: [],
      live: { clientId: clientIdOf, keyId: k.id },
    });
  };
  const replaceOp = (addr: string, next: Operation) => {
    // Only the update of the same generation (an older one may have its own expiry update).
    const i = ops.findIndex(
      (o) => o.address === addr && o.kind === 'key' && o.action === 'update' && o.live?.keyId === next.live?.keyId,
    );
    if (i >= 0) ops.splice(i, 1);
    ops.push(next);
  };

  // Indexed loops: this runs once per plan, mostly before V8 optimizes it, and there a for-of
  // allocates an iterator result per item (and a closure per client would be made for nothing).
  const desiredClients = input.desired.clients;
  for (let ci = 0; ci < desiredClients.length; ci++) {
    const c = desiredClients[ci]!;
    const lc = liveClients[ci]?.value;
    if (!lc) continue;
    // Worked out for the first key that needs it: most clients of a large plan have none.
    let ownedAnswer: boolean | undefined;
    const isProtected = c.protected === true || lc.metadata[PROTECTED_MARKER_KEY] === 'true';
    for (let ki = 0; ki < c.keys.length; ki++) {
      const k = c.keys[ki]!;
      // Generations of the key, oldest first (reader order): the current one and those before it.
      let current: LiveKey | undefined;
      let older: LiveKey[] | undefined;
      for (let xi = 0; xi < lc.keys.length; xi++) {
        const x = lc.keys[xi]!;
        if (x.name !== k.name) continue;
        if (current) (older ??= []).push(current);
        current = x;
      }
      if (!current) continue;
      const expiresAt = current.expiresAt ? Date.parse(current.expiresAt) : undefined;
      // Most keys of a large configuration have nothing to report: one generation, no expiry, no
      // secret status, no rotation asked for. They cost no more than this check.
      if (
        !older &&
        expiresAt === undefined &&
        !checkSecrets &&
        force.length === 0 &&
        (orphanIds.size === 0 || !orphanIds.has(current.id))
      )
        continue;
      const addr = address.key(c.projectEnv, c.name, k.name);
      const overlap = durationMs(k.rotation?.overlap);

      // Older generations left by an earlier rotation: revoke once expired or past the overlap,
      // which runs from the creation of the generation that replaced each one.
      for (let oi = 0; oi < (older?.length ?? 0); oi++) {
        const old = older![oi]!;
        const successor = older![oi + 1] ?? current;
        const replacedAt = successor.createdAt ? Date.parse(successor.createdAt) : undefined;
        if (orphanIds.has(old.id)) {
          revokeOrphan(addr, c.projectEnv, lc.id, old);
          continue;
        }
        const expired = old.expiresAt ? Date.parse(old.expiresAt) <= t : false;
        // No overlap configured (any more: it may have been removed since the rotation): the
        // default overlap holds, so an old generation never outlives its successor by more than it.
        const effectiveOverlap = overlap ?? DEFAULT_ROTATION_OVERLAP_MS;
        const overlapDone = replacedAt !== undefined && replacedAt + effectiveOverlap <= t;
        if (!(ownedAnswer ??= isOwned(lc, plan)) || isProtected) continue;
        if (!(expired || overlapDone)) {
          const limit =
            overlap === undefined && replacedAt !== undefined ? replacedAt + DEFAULT_ROTATION_OVERLAP_MS : undefined;
          if (limit !== undefined && (!old.expiresAt || Date.parse(old.expiresAt) > limit)) {
            const until = new Date(limit).toISOString();
            ops.push({
              address: addr,
              kind: 'key',
              action: 'update',
              projectEnv: c.projectEnv,
              reason: `previous generation after a rotation: it expires ${days(DEFAULT_ROTATION_OVERLAP_MS)} after its replacement (the default overlap; set rotation.overlap to change it)`,
              actionReason: 'expire_rotated_out',
              before: { name: old.name, expiresAt: old.expiresAt ?? null, autoRotate: old.autoRotate ?? false },
              after: {
                name: old.name,
                expiresAt: until,
                ...(old.autoRotate !== undefined ? { autoRotate: old.autoRotate } : {}),
              },
              changes: [{ path: 'expiresAt', before: old.expiresAt ?? null, after: until }],
              live: { clientId: lc.id, keyId: old.id },
            });
          }
          continue;
        }
        revoked.add(old.id);
        ops.push({
          address: addr,
          kind: 'key',
          action: 'delete',
          projectEnv: c.projectEnv,
          reason: expired
            ? 'previous generation after a rotation, now expired'
            : overlap === undefined
              ? `previous generation after a rotation, the default overlap of ${days(DEFAULT_ROTATION_OVERLAP_MS)} has passed`
              : 'previous generation after a rotation, overlap has passed',
          actionReason: 'delete_rotated_out',
          before: { name: old.name, expiresAt: old.expiresAt ?? null, autoRotate: old.autoRotate ?? false },
          after: null,
          changes: [],
          live: { clientId: lc.id, keyId: old.id },
        });
      }

      // Findings on the current key.
      const window = expiresAt === undefined ? 0 : rotationWindowMs(k, current);
      const autoRotates = Boolean(k.autoRotate || k.ttl);
      let rotateReason: Operation['actionReason'] | undefined;
      let why = '';
      if (expiresAt !== undefined && (expiresAt <= t || expiresAt - t <= window)) {
        const expired = expiresAt <= t;
        findings.push({
          address: addr,
          projectEnv: c.projectEnv,
          finding: expired ? 'expired' : 'expiring',
          expiresAt: current.expiresAt ?? null,
          detail: expired
            ? `expired on ${current.expiresAt}`
            : `expires in ${days(expiresAt - t)} (${current.expiresAt}), inside the ${days(window)} rotation window`,
          rotationPlanned: autoRotates,
        });
        if (autoRotates) {
          rotateReason = 'rotate_expiring';
          why = expired
            ? `expired on ${current.expiresAt}`
            : `expires in ${days(expiresAt - t)}, inside the ${days(window)} rotation window`;
        }
      }
      const secret = (ownedAnswer ??= isOwned(lc, plan)) ? input.secrets.get(addr) : undefined;
      const orphan = orphanIds.has(current.id);
      if (orphan) {
        rotateReason = 'reissue_lost_key';
        why =
          'issued by a run that was interrupted before its raw value was saved: a new key is issued and stored, then this one is revoked';
      } else if (secret && (secret.status === 'missing' || secret.status === 'stale')) {
        // A secret kms-sync does not hold (adopted key, store changed, secret removed): the key
        // may be in use by whoever holds it, so it is reported, and rotated only when asked.
        const rotate = Boolean(input.rotateMissingSecrets);
        findings.push({
          address: addr,
          projectEnv: c.projectEnv,
          finding: 'secret_missing',
          expiresAt: current.expiresAt ?? null,
          detail:
            `secret not held: ${secret.detail ?? (secret.status === 'missing' ? 'its secret is not in its store' : 'its store holds the secret of an older key')}` +
            (rotate ? '' : `; not rotated (run kms-sync rotate --key ${addr}, or plan with --rotate-missing-secrets)`),
          rotationPlanned: rotate,
        });
        if (rotate) {
          rotateReason ??= 'rotate_secret_missing';
          why ||= `${secret.status === 'missing' ? 'its secret is missing from its store' : 'its store holds an older key'}; the raw value cannot be recovered, so a new key is issued`;
        }
      }
      if (force.some((re) => re.test(addr))) {
        rotateReason = 'rotate_forced';
        why = 'rotation requested';
      }
      if (!rotateReason) continue;
      for (const f of findings) if (f.address === addr) f.rotationPlanned = true;
      // The new generation lives as long as the key's ttl, else as long as the current one did.
      const after = keyAfter(k);
      if (!after.ttl && after.expiresAt && current.createdAt && current.expiresAt) {
        const lifetime = Date.parse(current.expiresAt) - Date.parse(current.createdAt);
        if (lifetime > 0) {
          delete after.expiresAt;
          after.ttl = `${Math.round(lifetime / 1000)}s`;
        }
      }
      replaceOp(addr, {
        address: addr,
        kind: 'key',
        action: 'rotate',
        projectEnv: c.projectEnv,
        reason: why,
        actionReason: rotateReason,
        before: { name: current.name, expiresAt: current.expiresAt ?? null, autoRotate: current.autoRotate ?? false },
        after: after as unknown as Record<string, unknown>,
        changes: [],
        live: { clientId: lc.id, keyId: current.id, clientKeyIds: lc.keys.map((x) => x.id) },
        issuesKeys: 1,
      });
      if (orphan) {
        revokeOrphan(addr, c.projectEnv, lc.id, current);
        continue;
      }
      const revokeNow = overlap === 0 || (rotateReason === 'rotate_forced' && input.revokeOld);
      if (revokeNow) {
        if (isProtected) {
          warnings.push(`${addr}: the old key is kept after rotation because its client is protected`);
        } else {
          ops.push({
            address: addr,
            kind: 'key',
            action: 'delete',
            projectEnv: c.projectEnv,
            reason: 'old key revoked once its replacement is stored (overlap 0)',
            actionReason: 'delete_rotated_out',
            before: {
              name: current.name,
              expiresAt: current.expiresAt ?? null,
              autoRotate: current.autoRotate ?? false,
            },
            after: null,
            changes: [],
            live: { clientId: lc.id, keyId: current.id },
          });
        }
      } else if (overlap === undefined && !isProtected) {
        // The default overlap: the old key's expiry is brought forward (in the same request that
        // issues its successor) when it would outlive it by more than DEFAULT_ROTATION_OVERLAP_MS.
        const limit = t + DEFAULT_ROTATION_OVERLAP_MS;
        if (expiresAt === undefined || expiresAt > limit) {
          const until = new Date(limit).toISOString();
          ops.push({
            address: addr,
            kind: 'key',
            action: 'update',
            projectEnv: c.projectEnv,
            reason: `the old key stays valid for ${days(DEFAULT_ROTATION_OVERLAP_MS)} after its replacement, then expires (the default overlap; set rotation.overlap to change it)`,
            actionReason: 'expire_rotated_out',
            before: {
              name: current.name,
              expiresAt: current.expiresAt ?? null,
              autoRotate: current.autoRotate ?? false,
            },
            after: {
              name: current.name,
              expiresAt: until,
              ...(current.autoRotate !== undefined ? { autoRotate: current.autoRotate } : {}),
              secret: after.secret,
            } as unknown as Record<string, unknown>,
            changes: [{ path: 'expiresAt', before: current.expiresAt ?? null, after: until }],
            live: { clientId: lc.id, keyId: current.id },
          });
        }
      }
    }
  }
  // Orphans whose key name (or client) is no longer configured: revoked as they are.
  const desiredKeys = input.orphans?.length
    ? new Set(input.desired.clients.flatMap((c) => c.keys.map((k) => address.key(c.projectEnv, c.name, k.name))))
    : new Set<string>();
  for (const o of input.orphans ?? []) {
    const addr = address.key(o.projectEnv, o.client, o.keyName);
    if (revoked.has(o.keyId) || desiredKeys.has(addr)) continue;
    revokeOrphan(addr, o.projectEnv, o.clientId, { id: o.keyId, name: o.keyName });
  }
  findings.sort((a, b) => (a.address < b.address ? -1 : a.address > b.address ? 1 : a.finding < b.finding ? -1 : 1));
  sortOperations(ops);
  return { ...plan, operations: ops, keyFindings: findings, warnings, summary: summarize(ops, plan.unmanaged) };
}

/** The plan's configuration manages this client (or claims it with --take-ownership). */
function isOwned(lc: LiveClient, plan: Plan): boolean {
  return (
    isManagedBy(lc.metadata, plan.target.owner, lc.held) ||
    (plan.options.takeOwnership === true && ownershipOf(lc.metadata, plan.target.owner).kind === 'other')
  );
}

/** The key addresses whose secrets the plan should check: current keys of clients kms-sync owns. */
export function keysToCheck(
  desired: DesiredState,
  live: LiveState,
  owner: string,
  clientMatch?: KeptMatch<DesiredClient, LiveClient>,
): { address: string; store?: string; secretName: string; keyId: string; projectEnv: string }[] {
  const liveClients = matchAgain(clientMatch, desired.clients, live.clients);
  const out: { address: string; store?: string; secretName: string; keyId: string; projectEnv: string }[] = [];
  for (let i = 0; i < desired.clients.length; i++) {
    const c = desired.clients[i]!;
    const lc = liveClients[i]?.value;
    if (!lc || !isManagedBy(lc.metadata, owner, lc.held)) continue;
    for (const k of c.keys) {
      const current = lc.keys.filter((x) => x.name === k.name).at(-1);
      if (!current) continue;
      const after = keyAfter(k);
      out.push({
        address: address.key(c.projectEnv, c.name, k.name),
        ...(after.secret.store ? { store: after.secret.store } : {}),
        secretName: after.secret.name,
        keyId: current.id,
        projectEnv: c.projectEnv,
      });
    }
  }
  return out;
}
