// Projects: created with their first environments and templates in one POST (the API has no
// project without an environment), renamed through any of their environments, deleted whole.
import type { TemplateInput } from '../../api/client.js';
import { deleteIdempotent, type ApplyContext } from '../context.js';

export interface ProjectCreate {
  slug: string;
  name: string;
  description?: string;
  envs: { type: string; url: string; templates: TemplateInput[] }[];
}

export async function createProject(ctx: ApplyContext, p: ProjectCreate): Promise<void> {
  if (p.envs.length === 0) throw new Error('a project is created with at least one environment; none is configured in scope');
  const created = await ctx.api.createProject({
    slug: p.slug, name: p.name, ...(p.description !== undefined ? { description: p.description } : {}), envs: p.envs,
  });
  ctx.templates.remember(created);
}

/** Renames a project; `anyEnv` is one of its environments (the API addresses projects by env). */
export async function renameProject(ctx: ApplyContext, anyEnv: string, name: string): Promise<void> {
  await ctx.api.updateProject(anyEnv, { name });
}

/** Deletes a project with everything in it; `anyEnv` is one of its environments. */
export function deleteProject(ctx: ApplyContext, anyEnv: string) {
  return deleteIdempotent(() => ctx.api.deleteProject(anyEnv, { kind: 'project' }));
}
