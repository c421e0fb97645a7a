// Template capacity, checked before any write: the service refuses a client create once its
// template holds `maxClients` clients (CLIENT_LIMIT_REACHED), so a plan that would need more is
// refused whole instead of creating the first hundred and failing the rest. Counted per template
// in its environment, over the clients that exist once the plan is applied: the live ones that
// stay, plus the creates, minus the deletes, with clients moved between templates counted where
// they land. The limit is the one the plan leaves on the template: the declared `maxClients`, else
// the live template's, else (a template the plan creates without one) the service's default.
// Apply creates and moves clients before it deletes any (deletes run last, in reverse dependency
// order): a plan that fits only once its deletes have run would still fail part-way, so the count
// while it applies (every live client, plus those created on or moved to the template) is checked
// too, and that refusal says to apply the removal first.
import { address, SERVICE_DEFAULT_MAX_CLIENTS, type LiveState } from '../model/index.js';
import type { Plan } from './types.js';

export interface CapacityProblem {
  /** The template's address (template.ENV/NAME). */
  address: string;
  projectEnv: string;
  template: string;
  limit: number;
  /** Whether the limit is the service's default (no maxClients declared or read). */
  defaultLimit: boolean;
  /** Clients on the template now, and once the plan is applied. */
  now: number;
  after: number;
  /** The most it holds while the plan applies (creates and moves run before deletes). */
  peak: number;
}

const key = (projectEnv: string, template: string) => `${projectEnv}\u0000${template}`;

/** Templates the plan would fill past their client maximum (empty: the plan fits). */
export function capacityProblems(
  plan: Pick<Plan, 'operations'>,
  live: Pick<LiveState, 'templates' | 'clients'>,
): CapacityProblem[] {
  // The limit each template has once the plan is applied.
  const limits = new Map<string, { limit: number; defaultLimit: boolean; changed: boolean }>();
  const templateName = new Map<string, string>();
  for (const t of live.templates) {
    templateName.set(t.id, t.name);
    limits.set(key(t.projectEnv, t.name), {
      limit: t.maxClients ?? SERVICE_DEFAULT_MAX_CLIENTS,
      defaultLimit: t.maxClients === undefined,
      changed: false,
    });
  }
  for (const op of plan.operations) {
    if (op.kind !== 'template' || !op.projectEnv || !op.after) continue;
    const declared = op.after.maxClients as number | undefined;
    const k = key(op.projectEnv, op.after.name as string);
    if (op.action === 'create')
      limits.set(k, {
        limit: declared ?? SERVICE_DEFAULT_MAX_CLIENTS,
        defaultLimit: declared === undefined,
        changed: true,
      });
    else if (declared !== undefined) limits.set(k, { limit: declared, defaultLimit: false, changed: true });
  }
  // Only a template the plan re-limits or puts clients on can become a problem (deletes only
  // lower a count): the others' clients are not counted, and a plan touching none (a no-op plan of
  // a fleet) counts nothing.
  const relevant = new Map<string, Set<string>>();
  const touch = (projectEnv: string, template: string) => {
    let s = relevant.get(projectEnv);
    if (!s) relevant.set(projectEnv, (s = new Set()));
    s.add(template);
  };
  for (const op of plan.operations) {
    if (!op.projectEnv || !op.after) continue;
    if (op.kind === 'template' && (op.action === 'create' || op.after.maxClients !== undefined))
      touch(op.projectEnv, op.after.name as string);
    else if (op.kind === 'client' && op.action !== 'delete' && typeof op.after.template === 'string')
      touch(op.projectEnv, op.after.template);
  }
  if (relevant.size === 0) return [];
  // Where each client is now, and where it is once the plan is applied.
  const now = new Map<string, number>();
  const placed = new Map<string, string>();
  for (const c of live.clients) {
    const t = c.templateName ?? (c.templateId ? templateName.get(c.templateId) : undefined);
    if (t === undefined || !relevant.get(c.projectEnv)?.has(t)) continue;
    const k = key(c.projectEnv, t);
    now.set(k, (now.get(k) ?? 0) + 1);
    placed.set(key(c.projectEnv, c.name), k);
  }
  const grows = new Set<string>();
  const incoming = new Map<string, number>();
  for (const op of plan.operations) {
    if (op.kind !== 'client' || !op.projectEnv) continue;
    const name = ((op.after ?? op.before)?.name as string | undefined) ?? op.address.split('/').pop()!;
    const c = key(op.projectEnv, name);
    if (op.action === 'delete') placed.delete(c);
    else if (op.after && typeof op.after.template === 'string') {
      const k = key(op.projectEnv, op.after.template);
      if (placed.get(c) !== k) {
        grows.add(k);
        incoming.set(k, (incoming.get(k) ?? 0) + 1);
      }
      placed.set(c, k);
    }
  }
  const after = new Map<string, number>();
  for (const k of placed.values()) after.set(k, (after.get(k) ?? 0) + 1);
  const problems: CapacityProblem[] = [];
  for (const k of new Set([...after.keys(), ...incoming.keys()])) {
    const l = limits.get(k);
    const count = after.get(k) ?? 0;
    const peak = (now.get(k) ?? 0) + (incoming.get(k) ?? 0);
    if (!l || (count <= l.limit && (peak <= l.limit || !grows.has(k)))) continue;
    // A template already over its limit that the plan neither fills nor re-limits is not this plan's doing.
    if (!grows.has(k) && !l.changed) continue;
    const [projectEnv, template] = k.split('\u0000') as [string, string];
    problems.push({
      address: address.template(projectEnv, template),
      projectEnv,
      template,
      limit: l.limit,
      defaultLimit: l.defaultLimit,
      now: now.get(k) ?? 0,
      after: count,
      peak: Math.max(peak, count),
    });
  }
  return problems.sort((a, b) => (a.address < b.address ? -1 : a.address > b.address ? 1 : 0));
}

/** One line per template: what it allows, what the plan would put on it, and the way out. */
export function describeCapacity(p: CapacityProblem): string {
  const limit = p.defaultLimit
    ? `${p.limit} client(s) (the service's default: no maxClients declared)`
    : `${p.limit} client(s) (its maxClients)`;
  if (p.after > p.limit) {
    return `${p.address} allows ${limit} but this plan would leave ${p.after} on it (${p.now} now): refused before any write; set maxClients to at least ${p.after} or spread the clients over more templates`;
  }
  return `${p.address} allows ${limit}; this plan leaves ${p.after} on it, but apply creates before it deletes, so it would hold ${p.peak} part-way (${p.now} now): refused before any write; apply the removals first (a configuration without the new clients), then add them, or raise maxClients to at least ${p.peak}`;
}
