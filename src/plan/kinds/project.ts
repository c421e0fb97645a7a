// How a project is planned: created when missing, renamed in place. The service cannot change a
// project's description after creation (a warning says so), and a project is never deleted by a
// plan (`kms-sync destroy` removes one with its environments: ../removal.ts, with `projectDelete`).
import { address, type DesiredProject, type JsonValue, type LiveProject } from '../../model/index.js';
import { change } from '../compare.js';
import type { Operation } from '../types.js';
import { recordedDrift, type KindPlanner, type PlanContext } from './contract.js';

/** The delete of a project with all its environments (the API addresses it through one of them: `projectEnv`). */
export function projectDelete(slug: string, name: string, projectEnv: string, reason: string): Operation {
  return {
    address: address.project(slug),
    kind: 'project',
    action: 'delete',
    projectEnv,
    project: slug,
    reason,
    actionReason: 'delete_removed_from_config',
    before: { slug, name },
    after: null,
    changes: [],
  };
}

/** The fields of a project its configuration manages (desired, or as live): what the inventory's applied digest covers. */
export function projectRecord(
  p: Pick<DesiredProject, 'name'>,
  lp?: LiveProject,
): Record<string, JsonValue | undefined> {
  return { name: lp ? lp.name : p.name };
}

export function planProjects(desired: readonly DesiredProject[], live: readonly LiveProject[], ctx: PlanContext): void {
  const liveProjects = new Map(live.map((p) => [p.slug, p]));
  for (const p of desired) {
    const lp = liveProjects.get(p.slug);
    const after = {
      slug: p.slug,
      name: p.name,
      ...(p.description !== undefined ? { description: p.description } : {}),
    };
    if (!lp) {
      ctx.ops.push({
        address: address.project(p.slug),
        kind: 'project',
        action: 'create',
        project: p.slug,
        reason: 'project does not exist',
        actionReason: 'create_missing',
        before: null,
        after,
        changes: [],
      });
      continue;
    }
    const changes = change('name', lp.name, p.name);
    if (p.description !== undefined && (lp.description ?? '') !== p.description) {
      ctx.warnings.push(
        `${address.project(p.slug)}: description differs from the live one, but the service cannot update a project's description in place; change it in the dashboard`,
      );
    }
    if (changes.length) {
      ctx.ops.push({
        address: address.project(p.slug),
        kind: 'project',
        action: 'update',
        project: p.slug,
        reason: 'name changed',
        actionReason: 'update_changed',
        before: { slug: lp.slug, name: lp.name },
        after: { slug: p.slug, name: p.name },
        changes,
        ...recordedDrift(ctx, address.project(p.slug), projectRecord(p), projectRecord(p, lp)),
      });
    }
  }
}

export const projectPlanner: KindPlanner = {
  kinds: ['project'],
  plan: (d, l, ctx) => planProjects(d.projects, l.projects, ctx),
};
