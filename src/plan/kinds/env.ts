// How an environment is planned: created when missing, its url updated in place (its project and
// type are its identity). An environment that left the configuration is removed as a whole, with
// what it holds, or kept, by ownership: ../removal.ts, which the engine runs before the kinds.
import { address, type DesiredEnv, type LiveEnv } from '../../model/index.js';
import { change } from '../compare.js';
import type { Operation } from '../types.js';
import type { KindPlanner, PlanContext } from './contract.js';

/** The delete of a live environment (its templates go with it; its clients and endpoints go first, as their own operations). */
export function envDelete(le: LiveEnv, reason: string): Operation {
  return {
    address: address.env(le.projectEnv), kind: 'env', action: 'delete', projectEnv: le.projectEnv, project: le.project,
    reason, actionReason: 'delete_removed_from_config', before: { project: le.project, type: le.type, url: le.url ?? null }, after: null, changes: [], live: { envId: le.id },
  };
}

export function planEnvs(desired: readonly DesiredEnv[], live: readonly LiveEnv[], ctx: PlanContext): void {
  const liveEnvs = new Map(live.map((e) => [e.projectEnv, e]));
  for (const e of desired) {
    const le = liveEnvs.get(e.projectEnv);
    const after = { project: e.project, type: e.type, url: e.url };
    if (!le) {
      ctx.ops.push({
        address: address.env(e.projectEnv), kind: 'env', action: 'create', projectEnv: e.projectEnv, project: e.project,
        reason: 'environment does not exist', actionReason: 'create_missing', before: null, after, changes: [],
      });
      continue;
    }
    const changes = le.url !== undefined ? change('url', le.url, e.url) : [];
    if (changes.length) {
      ctx.ops.push({
        address: address.env(e.projectEnv), kind: 'env', action: 'update', projectEnv: e.projectEnv, project: e.project,
        reason: 'url changed', actionReason: 'update_changed', before: { project: le.project, type: le.type, url: le.url },
        after, changes, live: { envId: le.id },
      });
    }
  }
}

export const envPlanner: KindPlanner = { kinds: ['env'], plan: (d, l, ctx) => planEnvs(d.envs, l.envs, ctx) };
