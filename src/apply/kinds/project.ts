// Projects: created with their first environments and templates in one POST (the API has no
// project without an environment), renamed through any of their environments, deleted whole.
import { AmbiguousWriteError, ApiError } from '../../api/http.js';
import type { TemplateInput, WireProject } from '../../api/client.js';
import { deleteIdempotent, type ApplyContext } from '../context.js';

export interface ProjectCreate {
  slug: string;
  name: string;
  description?: string;
  envs: { type: string; url: string; templates: TemplateInput[] }[];
}

/**
 * Creates a project; returns a note when its response was lost. A project carries no secret, so a
 * lost response is resolved by re-reading it: there now, the create took effect (the plan saw no
 * such project, and the run lock keeps other runs of this configuration out); absent, it is sent again.
 */
export async function createProject(ctx: ApplyContext, p: ProjectCreate): Promise<string | undefined> {
  if (p.envs.length === 0)
    throw new Error('a project is created with at least one environment; none is configured in scope');
  const send = () =>
    ctx.api.createProject({
      slug: p.slug,
      name: p.name,
      ...(p.description !== undefined ? { description: p.description } : {}),
      envs: p.envs,
    });
  try {
    ctx.templates.remember(await send());
    return undefined;
  } catch (e) {
    if (!(e instanceof AmbiguousWriteError)) throw e;
  }
  let live: WireProject | undefined;
  try {
    live = await ctx.api.getProject(`${p.slug}-${p.envs[0]!.type}`);
  } catch (e) {
    if (!(e instanceof ApiError && e.status === 404))
      throw new AmbiguousWriteError(
        'POST',
        '/project',
        `the response was lost and re-reading the project failed: ${(e as Error).message}`,
      );
  }
  if (live) {
    ctx.templates.remember(live);
    return 'created; the response was lost and the project was re-read';
  }
  ctx.templates.remember(await send());
  return 'created again after a lost response (the first attempt had not taken effect)';
}

/** Renames a project; `anyEnv` is one of its environments (the API addresses projects by env). */
export async function renameProject(ctx: ApplyContext, anyEnv: string, name: string): Promise<void> {
  await ctx.api.updateProject(anyEnv, { name });
}

/** Deletes a project with everything in it; `anyEnv` is one of its environments. */
export function deleteProject(ctx: ApplyContext, anyEnv: string) {
  return deleteIdempotent(() => ctx.api.deleteProject(anyEnv, { kind: 'project' }));
}
