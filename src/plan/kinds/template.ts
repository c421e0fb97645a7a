// How a template is planned: created when missing, its limits updated in place. Templates carry
// no metadata: whose one is follows from the clients that use it (`templateOwnership`, the rule
// the provider's kms_template follows too). A template only another configuration's clients use
// is never changed, one they use never deleted; one not in the configuration is reported, and deleted only when pruning, and
// never in an environment another configuration shares. Identities two live templates share are
// left alone.
import {
  address,
  type DesiredTemplate,
  type JsonValue,
  type LiveClient,
  type LiveEndpoint,
  type LiveTemplate,
} from '../../model/index.js';
import { othersAlone, ownershipByContents, type ContentOwnership, type Holding } from '../../model/ownership.js';
import { change } from '../compare.js';
import { ownedElsewhere, recordedDrift, type KindPlanner, type PlanContext } from './contract.js';
import { envOwnership } from './env.js';

/**
 * Whose a template is: another configuration's as soon as one of its clients uses the template
 * (unless take-ownership claims it), this configuration's when only its own (and unmarked ones)
 * do, nobody's known when no client of kms-sync uses it. `users`: the clients that use it.
 */
export const templateOwnership = (users: Iterable<Holding>, owner: string, takeOwnership = false): ContentOwnership =>
  ownershipByContents(users, owner, takeOwnership);

/** The clients of an environment that use a template, as holdings (for `templateOwnership`). */
export function templateUsers(
  clients: readonly Pick<LiveClient, 'projectEnv' | 'name' | 'templateId' | 'metadata' | 'held'>[],
  t: Pick<LiveTemplate, 'id'>,
): Holding[] {
  return clients
    .filter((c) => c.templateId === t.id)
    .map((c) => ({
      address: address.client(c.projectEnv, c.name),
      metadata: c.metadata,
      ...(c.held ? { held: true } : {}),
    }));
}

/** The fields of a template its configuration manages (desired, or as live): what the inventory's applied digest covers. */
export function templateRecord(
  t: Pick<DesiredTemplate, 'rateLimitDay' | 'maxClients'>,
  lt?: LiveTemplate,
): Record<string, JsonValue | undefined> {
  if (!lt) return { rateLimitDay: t.rateLimitDay, maxClients: t.maxClients };
  // maxClients is compared only when both sides have it (planTemplates).
  return {
    rateLimitDay: lt.rateLimitDay,
    maxClients: t.maxClients !== undefined ? (lt.maxClients ?? t.maxClients) : undefined,
  };
}

const templateBefore = (lt: LiveTemplate) => ({
  name: lt.name,
  rateLimitDay: lt.rateLimitDay,
  maxClients: lt.maxClients ?? null,
});

export function planTemplates(
  desired: readonly DesiredTemplate[],
  live: readonly LiveTemplate[],
  ctx: PlanContext,
  clients: readonly LiveClient[] = [],
  endpoints: readonly LiveEndpoint[] = [],
): void {
  const { duplicates } = ctx;
  // Clients by environment, read only for the templates that change or leave (most do neither).
  let byEnv: Map<string, LiveClient[]> | undefined;
  const clientsOf = (pe: string) => {
    if (!byEnv) {
      byEnv = new Map();
      for (const c of clients) (byEnv.get(c.projectEnv) ?? byEnv.set(c.projectEnv, []).get(c.projectEnv)!).push(c);
    }
    return byEnv.get(pe) ?? [];
  };
  const ownership = (lt: LiveTemplate) =>
    templateOwnership(templateUsers(clientsOf(lt.projectEnv), lt), ctx.owner, ctx.options.takeOwnership);
  const liveTemplates = new Map(live.map((t) => [address.template(t.projectEnv, t.name), t]));
  const desiredTemplateAddrs = new Set<string>();
  for (const t of desired) {
    const addr = address.template(t.projectEnv, t.name);
    desiredTemplateAddrs.add(addr);
    if (duplicates.has(addr)) continue;
    const lt = liveTemplates.get(addr);
    const after = {
      name: t.name,
      rateLimitDay: t.rateLimitDay,
      ...(t.maxClients !== undefined ? { maxClients: t.maxClients } : {}),
    };
    if (!lt) {
      ctx.ops.push({
        address: addr,
        kind: 'template',
        action: 'create',
        projectEnv: t.projectEnv,
        reason: 'template does not exist',
        actionReason: 'create_missing',
        before: null,
        after,
        changes: [],
      });
      continue;
    }
    const changes = [
      ...change('rateLimitDay', lt.rateLimitDay, t.rateLimitDay),
      ...(t.maxClients !== undefined && lt.maxClients !== undefined
        ? change('maxClients', lt.maxClients, t.maxClients)
        : []),
    ];
    if (changes.length) {
      const o = ownership(lt);
      if (othersAlone(o)) {
        ctx.unmanaged.push(
          ownedElsewhere(
            addr,
            'template',
            t.projectEnv,
            o.owner,
            changes.map((c) => c.path),
          ),
        );
        continue;
      }
      ctx.ops.push({
        address: addr,
        kind: 'template',
        action: 'update',
        projectEnv: t.projectEnv,
        reason: changes.map((c) => c.path).join(', ') + ' changed',
        actionReason: 'update_changed',
        before: templateBefore(lt),
        after,
        changes,
        live: { id: lt.id },
        ...recordedDrift(ctx, addr, templateRecord(t), templateRecord(t, lt)),
      });
    }
  }
  for (const [addr, lt] of liveTemplates) {
    if (desiredTemplateAddrs.has(addr) || duplicates.has(addr)) continue;
    const o = ownership(lt);
    if (o.kind === 'other') {
      ctx.unmanaged.push({
        address: addr,
        kind: 'template',
        projectEnv: lt.projectEnv,
        owner: o.owner,
        note: `used by ${o.address} of configuration '${o.owner}'; kept`,
      });
      continue;
    }
    // Unused, in an environment another configuration shares: it may be that configuration's
    // (a Terraform configuration's template before its first client), so pruning keeps it.
    const shared =
      o.kind === 'unknown' && ctx.options.prune
        ? envOwnership(
            holdingsOf(lt.projectEnv, clientsOf(lt.projectEnv), endpoints),
            ctx.owner,
            ctx.options.takeOwnership,
          )
        : undefined;
    if (shared?.kind === 'other') {
      ctx.unmanaged.push({
        address: addr,
        kind: 'template',
        projectEnv: lt.projectEnv,
        note: `not in the configuration, in an environment configuration '${shared.owner}' shares (${shared.address}): it may be that configuration's; kept`,
      });
      continue;
    }
    if (ctx.options.prune) {
      ctx.ops.push({
        address: addr,
        kind: 'template',
        action: 'delete',
        projectEnv: lt.projectEnv,
        reason: 'not in the configuration (--prune)',
        actionReason: 'delete_unmanaged_prune',
        before: templateBefore(lt),
        after: null,
        changes: [],
        live: { id: lt.id },
      });
    } else
      ctx.unmanaged.push({
        address: addr,
        kind: 'template',
        projectEnv: lt.projectEnv,
        note: 'not in the configuration; kept (use --prune to delete)',
      });
  }
}

/** The clients and endpoints of an environment, as holdings (for `envOwnership`). */
function holdingsOf(projectEnv: string, clients: readonly LiveClient[], endpoints: readonly LiveEndpoint[]): Holding[] {
  return [
    ...clients.map((c) => ({
      address: address.client(c.projectEnv, c.name),
      metadata: c.metadata,
      ...(c.held ? { held: true } : {}),
    })),
    ...endpoints
      .filter((e) => e.projectEnv === projectEnv)
      .map((e) => ({
        address: address.endpoint(e.projectEnv, e.method, e.path),
        metadata: e.metadata,
        ...(e.held ? { held: true } : {}),
      })),
  ];
}

export const templatePlanner: KindPlanner = {
  kinds: ['template'],
  plan: (d, l, ctx) => planTemplates(d.templates, l.templates, ctx, l.clients, l.endpoints),
};
