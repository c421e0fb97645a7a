// How a client is planned: created with its keys when missing; its type, template, IP allow-list
// and metadata updated in place (a field left out of the configuration is not managed); its keys
// planned with it (./key.ts). Ownership decides the rest: another configuration's client is kept
// and what this one wanted of it reported as blocked; a client that left the configuration is
// deleted when it is ours (or, with --prune, made by hand), else kept; a protected one is never
// deleted. What is applied is recorded as a digest in its metadata (`clientRecord`), so drift can
// tell a change made outside from one not yet applied.
import { address, type DesiredClient, type LiveClient } from '../../model/index.js';
import {
  APPLIED_KEY,
  appliedDigest,
  driftOrigin,
  managedMetadata,
  PROTECTED_MARKER_KEY,
} from '../../model/ownership.js';
import { addChange, addObjectChanges, differingFields } from '../compare.js';
import type { ActionReason, FieldChange, Operation } from '../types.js';
import {
  changedReason,
  claimReason,
  isProtectedLive,
  markerRemovedReason,
  ownedElsewhere,
  targetMetadata,
  type KindPlanner,
  type PlanContext,
} from './contract.js';
import { keepMatch, matchByIdentity } from './identity-index.js';
import { keyAfter, planKeys } from './key.js';

// What the applied digest covers: the rule book both engines share.
export { clientRecord } from '../../model/ownership.js';
import { clientRecord, mayChange } from '../../model/ownership.js';

/** What a configuration wants of a client another one owns: its differing fields and missing keys. */
export function blockedOfClient(c: DesiredClient, lc: LiveClient): string[] {
  const fields = differingFields(clientRecord(c), clientRecord(c, lc));
  for (const k of c.keys) if (!lc.keys.some((x) => x.name === k.name)) fields.push(`keys.${k.name}`);
  return fields;
}

export function clientAfter(c: DesiredClient, owner: string): Record<string, unknown> {
  return {
    name: c.name,
    ...(c.type !== undefined ? { type: c.type } : {}),
    template: c.template,
    ...(c.ipWhitelist !== undefined ? { ipWhitelist: c.ipWhitelist } : {}),
    metadata: managedMetadata(c.metadata, c.protected, owner, appliedDigest(clientRecord(c))),
  };
}

export function clientBefore(c: LiveClient): Record<string, unknown> {
  return {
    name: c.name,
    type: c.type ?? null,
    template: c.templateName ?? c.templateId ?? null,
    ipWhitelist: c.ipWhitelist,
    metadata: c.metadata,
  };
}

/** The delete of a live client (it revokes its keys with it), with its reason; `before.keys` names the keys it revokes. */
export function clientDelete(
  lc: LiveClient,
  reason: string,
  actionReason: ActionReason,
  addr = address.client(lc.projectEnv, lc.name),
): Operation {
  return {
    address: addr,
    kind: 'client',
    action: 'delete',
    projectEnv: lc.projectEnv,
    reason,
    actionReason,
    before: { ...clientBefore(lc), keys: lc.keys.map((k) => k.name) },
    after: null,
    changes: [],
    live: { id: lc.id },
  };
}

export function planClients(desired: readonly DesiredClient[], live: readonly LiveClient[], ctx: PlanContext): void {
  const { ops, unmanaged, warnings, owner, duplicates } = ctx;
  // Live clients by identity, matched without building an address per client: the addresses
  // are built only for what the plan reports (a no-op plan of 100,000 clients builds none).
  // Indexed loops here and below: this code runs once per plan, mostly before V8 optimizes it,
  // and there a for-of allocates an iterator result per item.
  const liveClients = matchByIdentity(
    desired,
    duplicates.size === 0 ? live : live.filter((c) => !duplicates.has(address.client(c.projectEnv, c.name))),
  );
  // The key assessment matches the unfiltered lists: kept only when that is what was matched here.
  if (duplicates.size === 0) ctx.clientMatch = keepMatch(desired, live, liveClients.matches);
  for (let i = 0; i < desired.length; i++) {
    const c = desired[i]!;
    const found = liveClients.matches[i];
    if (found) found.wanted = true;
    if (duplicates.size > 0 && duplicates.has(address.client(c.projectEnv, c.name))) continue;
    const lc = found?.value;
    if (!lc) {
      ops.push({
        address: address.client(c.projectEnv, c.name),
        kind: 'client',
        action: 'create',
        projectEnv: c.projectEnv,
        reason: 'client does not exist',
        actionReason: 'create_missing',
        before: null,
        after: { ...clientAfter(c, owner), keys: c.keys.map(keyAfter) },
        changes: [],
        issuesKeys: c.keys.length,
        ...(c.protected ? { protected: true } : {}),
      });
      continue;
    }
    const ownership = ctx.own(lc.metadata, lc.held);
    if (!mayChange(ownership)) {
      unmanaged.push(
        ownedElsewhere(
          address.client(c.projectEnv, c.name),
          'client',
          c.projectEnv,
          ownership.owner,
          blockedOfClient(c, lc),
        ),
      );
      continue;
    }
    // The before/after objects are built only for a client that changed: most of them did not.
    let metadata = targetMetadata(c.metadata, c.protected, lc.metadata, owner, undefined, lc.held);
    const changes: FieldChange[] = [];
    if (c.type !== undefined) addChange(changes, 'type', lc.type, c.type);
    addChange(changes, 'template', lc.templateName ?? lc.templateId, c.template);
    if (c.ipWhitelist !== undefined) addChange(changes, 'ipWhitelist', lc.ipWhitelist, c.ipWhitelist);
    addObjectChanges(changes, 'metadata', lc.metadata, metadata);
    if (changes.length) {
      const applied = appliedDigest(clientRecord(c));
      metadata = targetMetadata(c.metadata, c.protected, lc.metadata, owner, applied, lc.held);
      const markerRemoved = ownership.kind === 'ours' && ownership.markerRemoved === true;
      ops.push({
        // Stripped markers are a change made outside, whatever else the configuration changed.
        drift: markerRemoved
          ? 'outside'
          : driftOrigin(lc.metadata[APPLIED_KEY], applied, appliedDigest(clientRecord(c, lc))),
        address: address.client(c.projectEnv, c.name),
        kind: 'client',
        action: 'update',
        projectEnv: c.projectEnv,
        reason: markerRemoved
          ? markerRemovedReason(changes.map((x) => x.path))
          : ownership.kind === 'legacy'
            ? claimReason(changes)
            : changedReason(changes),
        actionReason: 'update_changed',
        before: clientBefore(lc),
        after: { ...clientAfter(c, owner), metadata },
        changes,
        live: { id: lc.id },
        ...(c.protected ? { protected: true } : {}),
      });
    }
    planKeys(c, lc, ctx, ownership.kind !== 'none');
  }
  for (let i = 0; i < liveClients.entries.length; i++) {
    const { value: lc, wanted } = liveClients.entries[i]!;
    if (wanted) continue;
    const addr = address.client(lc.projectEnv, lc.name);
    if (isProtectedLive(lc.metadata)) {
      warnings.push(
        `${addr}: removed from the configuration but marked protected; kept (remove the ${PROTECTED_MARKER_KEY} metadata to allow deleting it)`,
      );
      continue;
    }
    const ownership = ctx.own(lc.metadata, lc.held);
    if (ownership.kind === 'ours') {
      ops.push(
        clientDelete(
          lc,
          `removed from the configuration (owned by this configuration${ownership.markerRemoved ? '; its ownership marker was removed, its inventory holds it' : ''})`,
          'delete_removed_from_config',
          addr,
        ),
      );
    } else if (!mayChange(ownership)) {
      unmanaged.push({
        address: addr,
        kind: 'client',
        projectEnv: lc.projectEnv,
        owner: ownership.owner,
        note: `owned by configuration '${ownership.owner}'; kept`,
      });
    } else if (ownership.kind === 'legacy') {
      unmanaged.push({
        address: addr,
        kind: 'client',
        projectEnv: lc.projectEnv,
        note: 'created by kms-sync before owners were recorded, by a configuration unknown; kept (name it in a configuration to claim it)',
      });
    } else if (ctx.options.prune) {
      ops.push(clientDelete(lc, 'unmanaged, not in the configuration (--prune)', 'delete_unmanaged_prune', addr));
    } else
      unmanaged.push({
        address: addr,
        kind: 'client',
        projectEnv: lc.projectEnv,
        note: 'not created by kms-sync and not in the configuration; kept (use --prune to delete)',
      });
  }
}

export const clientPlanner: KindPlanner = {
  kinds: ['client', 'key'],
  plan: (d, l, ctx) => planClients(d.clients, l.clients, ctx),
};
