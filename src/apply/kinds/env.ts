// Environments and their templates share one write: PUT /project/{project_env} with `singleEnv`
// creates the environment when it is new, sets its URL, and upserts templates (by id, else name).
import type { TemplateInput } from '../../api/client.js';
import { deleteIdempotent, type ApplyContext } from '../context.js';

export type TemplateUpsert = TemplateInput & { id?: string };

export async function upsertEnv(
  ctx: ApplyContext,
  projectEnv: string,
  change: { url?: string; templates?: TemplateUpsert[] },
): Promise<void> {
  const updated = await ctx.api.updateProject(projectEnv, {
    singleEnv: {
      ...(change.url !== undefined ? { url: change.url } : {}),
      ...(change.templates?.length ? { templates: change.templates } : {}),
    },
  });
  ctx.templates.remember(updated);
}

/** Deletes an environment with its clients, keys and endpoints. */
export function deleteEnv(ctx: ApplyContext, projectEnv: string, envId: string) {
  return deleteIdempotent(() => ctx.api.deleteProject(projectEnv, { kind: 'env', envId }));
}
