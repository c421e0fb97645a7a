// Templates: written with their environment (PUT singleEnv.templates, upserted by id else by
// name), deleted one by one (DELETE /project/{project_env}?kind=template).
import { deleteIdempotent, type ApplyContext } from '../context.js';
import { upsertEnv, type TemplateUpsert } from './env.js';

export function upsertTemplates(ctx: ApplyContext, projectEnv: string, templates: TemplateUpsert[]): Promise<void> {
  return upsertEnv(ctx, projectEnv, { templates });
}

export function deleteTemplate(ctx: ApplyContext, projectEnv: string, templateId: string) {
  return deleteIdempotent(() => ctx.api.deleteProject(projectEnv, { kind: 'template', templateId }));
}
