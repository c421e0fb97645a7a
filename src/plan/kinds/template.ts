// How a template is planned: created when missing, its limits updated in place. Templates carry
// no metadata, so no ownership: one not in the configuration is reported, and deleted only when
// pruning. Identities two live templates share are left alone.
import { address, type DesiredTemplate, type LiveTemplate } from '../../model/index.js';
import { change } from '../compare.js';
import type { KindPlanner, PlanContext } from './contract.js';

const templateBefore = (lt: LiveTemplate) => ({ name: lt.name, rateLimitDay: lt.rateLimitDay, maxClients: lt.maxClients ?? null });

export function planTemplates(desired: readonly DesiredTemplate[], live: readonly LiveTemplate[], ctx: PlanContext): void {
  const { duplicates } = ctx;
  const liveTemplates = new Map(live.map((t) => [address.template(t.projectEnv, t.name), t]));
  const desiredTemplateAddrs = new Set<string>();
  for (const t of desired) {
    const addr = address.template(t.projectEnv, t.name);
    desiredTemplateAddrs.add(addr);
    if (duplicates.has(addr)) continue;
    const lt = liveTemplates.get(addr);
    const after = { name: t.name, rateLimitDay: t.rateLimitDay, ...(t.maxClients !== undefined ? { maxClients: t.maxClients } : {}) };
    if (!lt) {
      ctx.ops.push({
        address: addr, kind: 'template', action: 'create', projectEnv: t.projectEnv, reason: 'template does not exist',
        actionReason: 'create_missing', before: null, after, changes: [],
      });
      continue;
    }
    const changes = [
      ...change('rateLimitDay', lt.rateLimitDay, t.rateLimitDay),
      ...(t.maxClients !== undefined && lt.maxClients !== undefined ? change('maxClients', lt.maxClients, t.maxClients) : []),
    ];
    if (changes.length) {
      ctx.ops.push({
        address: addr, kind: 'template', action: 'update', projectEnv: t.projectEnv, reason: changes.map((c) => c.path).join(', ') + ' changed',
        actionReason: 'update_changed', before: templateBefore(lt), after, changes, live: { id: lt.id },
      });
    }
  }
  for (const [addr, lt] of liveTemplates) {
    if (desiredTemplateAddrs.has(addr) || duplicates.has(addr)) continue;
    if (ctx.options.prune) {
      ctx.ops.push({
        address: addr, kind: 'template', action: 'delete', projectEnv: lt.projectEnv, reason: 'not in the configuration (--prune)',
        actionReason: 'delete_unmanaged_prune', before: templateBefore(lt), after: null, changes: [], live: { id: lt.id },
      });
    } else ctx.unmanaged.push({ address: addr, kind: 'template', projectEnv: lt.projectEnv, note: 'not in the configuration; kept (use --prune to delete)' });
  }
}

export const templatePlanner: KindPlanner = { kinds: ['template'], plan: (d, l, ctx) => planTemplates(d.templates, l.templates, ctx) };
