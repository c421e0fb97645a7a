// How an endpoint is planned: registered when missing; its name, description and metadata updated
// in place; a changed request or response schema replaces it (the service cannot update those,
// and a replace resets its usage stats; never for a protected one). Ownership as for clients:
// another configuration's endpoint is kept, with what this one wanted of it reported as blocked;
// one that left the configuration is deleted when it is ours, kept otherwise: the SDK registers
// endpoints by itself, and kms-sync does not fight it unless pruning. The applied digest
// (`endpointRecord`) tells drift a change made outside from one not yet applied.
import { address, type DesiredEndpoint, type LiveEndpoint } from '../../model/index.js';
import { APPLIED_KEY, appliedDigest, driftOrigin, managedMetadata } from '../../model/ownership.js';
import { change, differingFields, objectChanges } from '../compare.js';
import type { ActionReason, Operation } from '../types.js';
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

// What the applied digest covers: the rule book both engines share.
export { endpointRecord } from '../../model/ownership.js';
import { endpointRecord, mayChange } from '../../model/ownership.js';

export function endpointAfter(e: DesiredEndpoint, owner: string): Record<string, unknown> {
  return {
    method: e.method,
    path: e.path,
    ...(e.name !== undefined ? { name: e.name } : {}),
    ...(e.description !== undefined ? { description: e.description } : {}),
    ...(e.request !== undefined ? { request: e.request } : {}),
    ...(e.response !== undefined ? { response: e.response } : {}),
    metadata: managedMetadata(e.metadata, e.protected, owner, appliedDigest(endpointRecord(e))),
  };
}

export function endpointBefore(e: LiveEndpoint): Record<string, unknown> {
  return {
    method: e.method,
    path: e.path,
    name: e.name,
    description: e.description,
    request: e.request,
    response: e.response,
    metadata: e.metadata,
  };
}

/** The delete of a live endpoint, with its reason. */
export function endpointDelete(
  le: LiveEndpoint,
  reason: string,
  actionReason: ActionReason,
  addr = address.endpoint(le.projectEnv, le.method, le.path),
): Operation {
  return {
    address: addr,
    kind: 'endpoint',
    action: 'delete',
    projectEnv: le.projectEnv,
    reason,
    actionReason,
    before: endpointBefore(le),
    after: null,
    changes: [],
  };
}

export function planEndpoints(
  desired: readonly DesiredEndpoint[],
  live: readonly LiveEndpoint[],
  ctx: PlanContext,
): void {
  const { ops, unmanaged, warnings, owner } = ctx;
  const liveEndpoints = new Map(live.map((e) => [address.endpoint(e.projectEnv, e.method, e.path), e]));
  const desiredEndpointAddrs = new Set<string>();
  for (const e of desired) {
    const addr = address.endpoint(e.projectEnv, e.method, e.path);
    desiredEndpointAddrs.add(addr);
    const le = liveEndpoints.get(addr);
    // Built (with the digest it hashes) only for an endpoint the plan changes: most are unchanged.
    const after = () => endpointAfter(e, owner);
    if (!le) {
      ops.push({
        address: addr,
        kind: 'endpoint',
        action: 'create',
        projectEnv: e.projectEnv,
        reason: 'endpoint is not registered',
        actionReason: 'create_missing',
        before: null,
        after: after(),
        changes: [],
        ...(e.protected ? { protected: true } : {}),
      });
      continue;
    }
    const eOwnership = ctx.own(le.metadata, le.held);
    const markerRemoved = eOwnership.kind === 'ours' && eOwnership.markerRemoved === true;
    if (!mayChange(eOwnership)) {
      unmanaged.push(
        ownedElsewhere(
          addr,
          'endpoint',
          e.projectEnv,
          eOwnership.owner,
          differingFields(endpointRecord(e), endpointRecord(e, le)),
        ),
      );
      continue;
    }
    const before = endpointBefore(le);
    let target = targetMetadata(e.metadata, e.protected, le.metadata ?? {}, owner, undefined, le.held);
    const immutable = [
      ...(e.request !== undefined ? change('request', le.request, e.request) : []),
      ...(e.response !== undefined ? change('response', le.response, e.response) : []),
    ];
    const mutable = [
      ...(e.name !== undefined ? change('name', le.name, e.name) : []),
      ...(e.description !== undefined ? change('description', le.description, e.description) : []),
      ...objectChanges('metadata', le.metadata ?? {}, target),
    ];
    // Only a changed endpoint gets a new digest of what is applied, and a drift origin.
    let origin: Operation['drift'];
    if (immutable.length || mutable.length) {
      const applied = appliedDigest(endpointRecord(e));
      target = targetMetadata(e.metadata, e.protected, le.metadata ?? {}, owner, applied, le.held);
      origin = markerRemoved
        ? 'outside'
        : driftOrigin(le.metadata?.[APPLIED_KEY], applied, appliedDigest(endpointRecord(e, le)));
    }
    if (immutable.length) {
      if (e.protected) {
        warnings.push(
          `${addr}: ${immutable.map((c) => c.path).join(' and ')} changed, which needs the endpoint replaced, but it is protected; not replaced`,
        );
      } else {
        ops.push({
          address: addr,
          kind: 'endpoint',
          action: 'replace',
          projectEnv: e.projectEnv,
          // The replacement is a new resource created by kms-sync: it carries the marker.
          reason: `${immutable.map((c) => c.path).join(' and ')} cannot be updated in place (replacing resets the endpoint's usage stats)`,
          actionReason: 'replace_immutable_field',
          before,
          after: after(),
          changes: [...immutable, ...mutable],
          ...(origin ? { drift: origin } : {}),
        });
        continue;
      }
    }
    if (mutable.length) {
      ops.push({
        address: addr,
        kind: 'endpoint',
        action: 'update',
        projectEnv: e.projectEnv,
        reason: markerRemoved
          ? markerRemovedReason(mutable.map((x) => x.path))
          : eOwnership.kind === 'legacy'
            ? claimReason(mutable)
            : changedReason(mutable),
        actionReason: 'update_changed',
        before,
        after: { ...after(), metadata: target },
        changes: mutable,
        ...(origin ? { drift: origin } : {}),
        ...(e.protected ? { protected: true } : {}),
      });
    }
  }
  for (const [addr, le] of liveEndpoints) {
    if (desiredEndpointAddrs.has(addr)) continue;
    if (isProtectedLive(le.metadata)) {
      warnings.push(`${addr}: removed from the configuration but marked protected; kept`);
      continue;
    }
    const ownership = ctx.own(le.metadata, le.held);
    if (ownership.kind === 'ours') {
      ops.push(
        endpointDelete(
          le,
          `removed from the configuration (owned by this configuration${ownership.markerRemoved ? '; its ownership marker was removed, its inventory holds it' : ''})`,
          'delete_removed_from_config',
          addr,
        ),
      );
    } else if (!mayChange(ownership)) {
      unmanaged.push({
        address: addr,
        kind: 'endpoint',
        projectEnv: le.projectEnv,
        owner: ownership.owner,
        note: `owned by configuration '${ownership.owner}'; kept`,
      });
    } else if (ownership.kind === 'legacy') {
      unmanaged.push({
        address: addr,
        kind: 'endpoint',
        projectEnv: le.projectEnv,
        note: 'created by kms-sync before owners were recorded, by a configuration unknown; kept (name it in a configuration to claim it)',
      });
    } else if (ctx.options.prune) {
      ops.push(
        endpointDelete(
          le,
          'unmanaged (e.g. registered by the SDK), not in the configuration (--prune)',
          'delete_unmanaged_prune',
          addr,
        ),
      );
    } else
      unmanaged.push({
        address: addr,
        kind: 'endpoint',
        projectEnv: le.projectEnv,
        note: 'not in the configuration (the SDK may have registered it); kept (use --prune to delete)',
      });
  }
}

export const endpointPlanner: KindPlanner = {
  kinds: ['endpoint'],
  plan: (d, l, ctx) => planEndpoints(d.endpoints, l.endpoints, ctx),
};
