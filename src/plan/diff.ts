// Desired vs live → plan: the engine. What each kind's diff is lives in its own unit (kinds/, one
// file per kind, behind the contract of kinds/contract.ts); this file scopes the live state, runs
// the units in dependency order (kinds/index.ts) and sorts their operations. Comparison is on
// canonical forms (compare.ts); fields the service fills in (ids, stats, dates) are never
// compared. A field left out of the desired state is not managed (Terraform's optional+computed),
// except the ownership marker.
import {
  KIND_ORDER,
  type DesiredClient,
  type DesiredState,
  type LiveClient,
  type LiveState,
  type ResourceKind,
} from '../model/index.js';
import { planOwnership, type PlanContext } from './kinds/contract.js';
import type { KeptMatch } from './kinds/identity-index.js';
import { PLAN_KINDS } from './kinds/index.js';
import type { InventoryIndex } from './inventory.js';
import { contentsByEnv, planEnvRemoval } from './removal.js';
import { summarize, type Action, type Operation, type Plan } from './types.js';
import { WARNING_PHASE } from './types.js';

export { keyAfter } from './kinds/key.js';

/** The live state as read (live/read.ts `LiveReadResult`), as the plan needs it. */
export interface PlanLive {
  state: LiveState;
  /** Two live resources with one identity: reported, never guessed at. */
  duplicates: readonly { address: string; ids: string[] }[];
  /** Address → hash of what was read, recorded in the plan. */
  fingerprints: Record<string, string>;
}

export interface PlanInput {
  desired: DesiredState;
  live: PlanLive;
  prune: boolean;
  target: Plan['target'];
  now?: Date;
  /** Claim resources another configuration owns when this one names them (`--take-ownership`). */
  takeOwnership?: boolean;
  /** The configuration's inventory (plan/inventory.ts): its live clients and endpoints are marked `held` already. */
  inventory?: Pick<InventoryIndex, 'applied'>;
}

const ACTION_PHASE: Record<Action, number> = { create: 0, update: 0, replace: 0, rotate: 0, delete: 1 };

/** Stable order: creates/updates in dependency order, then deletes in reverse dependency order. */
export function sortOperations(ops: Operation[]): Operation[] {
  const kindIndex = (k: ResourceKind) => KIND_ORDER.indexOf(k);
  return ops.sort((a, b) => {
    const pa = ACTION_PHASE[a.action];
    const pb = ACTION_PHASE[b.action];
    if (pa !== pb) return pa - pb;
    const ka = pa === 0 ? kindIndex(a.kind) : -kindIndex(a.kind);
    const kb = pb === 0 ? kindIndex(b.kind) : -kindIndex(b.kind);
    if (ka !== kb) return ka - kb;
    return a.address < b.address ? -1 : a.address > b.address ? 1 : 0;
  });
}

export function buildPlan(input: PlanInput): Plan {
  return buildPlanPhased(input).plan;
}

/**
 * buildPlan, with the phase each warning was made in (plan/merge.ts WARNING_PHASE): plans of
 * parts of a configuration (an environment, a shard) are merged into the plan of the whole in
 * the order the whole would have put them.
 */
export function buildPlanPhased(input: PlanInput): {
  plan: Plan;
  phases: number[];
  /** The clients' match, for assessKeys and keysToCheck of the same lists. */
  clientMatch?: KeptMatch<DesiredClient, LiveClient>;
} {
  const phases: number[] = [];
  const mark = (phase: number) => {
    while (phases.length < ctx.warnings.length) phases.push(phase);
  };
  const { desired, live, prune } = input;
  const owner = input.target.owner;
  const takeOwnership = input.takeOwnership === true;
  const ctx: PlanContext = {
    owner,
    options: { prune, takeOwnership },
    duplicates: new Set(live.duplicates.map((d) => d.address)),
    own: planOwnership(owner, takeOwnership),
    ops: [],
    unmanaged: [],
    warnings: [],
    ...(input.inventory ? { applied: (addr: string) => input.inventory!.applied(addr) } : {}),
  };
  const { ops, unmanaged, warnings } = ctx;
  for (const d of live.duplicates) {
    warnings.push(
      `${d.address}: ${d.ids.length} live resources share this identity (${d.ids.join(', ')}); kms-sync leaves them alone until only one remains`,
    );
    mark(d.address.startsWith('template.') ? WARNING_PHASE.duplicateTemplate : WARNING_PHASE.duplicateClient);
  }
  // Environments that left the configuration (read because their project is still in it) are
  // removed as a whole or kept, by ownership (removal.ts); the kinds see only the others.
  const desiredEnvs = new Set(desired.envs.map((e) => e.projectEnv));
  const leaving = live.state.envs.filter((e) => !desiredEnvs.has(e.projectEnv));
  let state = live.state;
  if (leaving.length) {
    const byEnv = contentsByEnv(state);
    const gone = new Set(leaving.map((e) => e.projectEnv));
    const stays = <T extends { projectEnv: string }>(x: T) => !gone.has(x.projectEnv);
    state = {
      ...state,
      envs: state.envs.filter(stays),
      clients: state.clients.filter(stays),
      endpoints: state.endpoints.filter(stays),
      templates: state.templates.filter(stays),
    };
    for (const e of leaving) {
      const r = planEnvRemoval(byEnv.get(e.projectEnv)!, owner, { prune, why: 'left the configuration' });
      ops.push(...r.ops);
      warnings.push(...r.warnings);
      unmanaged.push(...r.unmanaged);
    }
  }
  mark(WARNING_PHASE.leaving);

  for (let i = 0; i < PLAN_KINDS.length; i++) {
    PLAN_KINDS[i]!.plan(desired, state, ctx);
    mark(WARNING_PHASE.kinds + i);
  }

  sortOperations(ops);
  unmanaged.sort((a, b) => (a.address < b.address ? -1 : a.address > b.address ? 1 : 0));
  const plan: Plan = {
    formatVersion: 1,
    generatedAt: (input.now ?? new Date()).toISOString(),
    target: input.target,
    options: { prune, ...(input.takeOwnership ? { takeOwnership: true } : {}) },
    operations: ops,
    unmanaged,
    keyFindings: [],
    warnings,
    summary: summarize(ops, unmanaged),
    stores: desired.stores.map(({ source: _s, ...s }) => s),
    fingerprints: live.fingerprints,
  };
  return { plan, phases, ...(ctx.clientMatch ? { clientMatch: ctx.clientMatch } : {}) };
}
