// How an environment is planned: created when missing, its url updated in place (its project and
// type are its identity). An environment that left the configuration is removed as a whole, with
// what it holds, or kept, by ownership: ../removal.ts, which the engine runs before the kinds.
// Whose an existing environment is, and what keeps one from being deleted: the rules below.
import { address, type DesiredEnv, type JsonValue, type LiveEnv } from '../../model/index.js';
import {
  isProtectedLive,
  ownershipByContents,
  ownershipOf,
  type ContentOwnership,
  type Holding,
} from '../../model/ownership.js';
import { change } from '../compare.js';
import type { Operation } from '../types.js';
import { recordedDrift, type KindPlanner, type PlanContext } from './contract.js';

/** The delete of a live environment (its templates go with it; its clients and endpoints go first, as their own operations). */
export function envDelete(le: LiveEnv, reason: string): Operation {
  return {
    address: address.env(le.projectEnv),
    kind: 'env',
    action: 'delete',
    projectEnv: le.projectEnv,
    project: le.project,
    reason,
    actionReason: 'delete_removed_from_config',
    before: { project: le.project, type: le.type, url: le.url ?? null },
    after: null,
    changes: [],
    live: { envId: le.id },
  };
}

/** The fields of an environment its configuration manages (desired, or as live): what the inventory's applied digest covers. */
export function envRecord(e: Pick<DesiredEnv, 'url'>, le?: LiveEnv): Record<string, JsonValue | undefined> {
  return { url: le ? (le.url ?? null) : e.url };
}

export function planEnvs(desired: readonly DesiredEnv[], live: readonly LiveEnv[], ctx: PlanContext): void {
  const liveEnvs = new Map(live.map((e) => [e.projectEnv, e]));
  for (const e of desired) {
    const le = liveEnvs.get(e.projectEnv);
    const after = { project: e.project, type: e.type, url: e.url };
    if (!le) {
      ctx.ops.push({
        address: address.env(e.projectEnv),
        kind: 'env',
        action: 'create',
        projectEnv: e.projectEnv,
        project: e.project,
        reason: 'environment does not exist',
        actionReason: 'create_missing',
        before: null,
        after,
        changes: [],
      });
      continue;
    }
    const changes = le.url !== undefined ? change('url', le.url, e.url) : [];
    if (changes.length) {
      ctx.ops.push({
        address: address.env(e.projectEnv),
        kind: 'env',
        action: 'update',
        projectEnv: e.projectEnv,
        project: e.project,
        reason: 'url changed',
        actionReason: 'update_changed',
        before: { project: le.project, type: le.type, url: le.url },
        after,
        changes,
        live: { envId: le.id },
        ...recordedDrift(ctx, address.env(e.projectEnv), envRecord(e), envRecord(e, le)),
      });
    }
  }
}

export const envPlanner: KindPlanner = { kinds: ['env'], plan: (d, l, ctx) => planEnvs(d.envs, l.envs, ctx) };

// ---------------------------------------------------------------- who an environment belongs to
// Environments carry no metadata: what they hold says whose they are. One rule book for both
// engines (the YAML plan's removal and the provider's kms_environment create and delete).

/**
 * Why one object in an environment keeps the environment from being deleted by this
 * configuration (undefined: it may go with it): another configuration's object or a protected
 * one always; one kms-sync made before owners were recorded, or one nobody made (by hand, by the
 * SDK), unless pruning.
 */
export function keepsEnv(h: Holding, owner: string, prune: boolean): string | undefined {
  const who = ownershipOf(h.metadata, owner, h.held);
  if (isProtectedLive(h.metadata)) return `${h.address} is protected`;
  if (who.kind === 'other') return `${h.address} is owned by configuration '${who.owner}'`;
  if (who.kind === 'legacy' && !prune)
    return `${h.address} was created by kms-sync before owners were recorded (owner unknown)`;
  if (who.kind === 'none' && !prune) return `${h.address} was not created by kms-sync`;
  return undefined;
}

/**
 * Whose an existing environment is, judged by what it holds (model/ownership.ts): another
 * configuration's as soon as it holds one of that configuration's clients or endpoints. A create
 * of an environment that exists adopts it only when it is this configuration's.
 */
export const envOwnership = (holdings: Iterable<Holding>, owner: string, takeOwnership = false): ContentOwnership =>
  ownershipByContents(holdings, owner, takeOwnership);
