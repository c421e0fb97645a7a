// kms_project: a project, identified by its slug. The API has no project without an environment:
// a create is recorded, and the first kms_environment of the project creates both in one POST.
import { DiagnosticError, type Diagnostics } from '../diagnostics.js';
import type { Engine } from '../engine.js';
import type { TfObject } from '../values/types.js';
import { handlers } from './state.js';
import { check, ids, matches, PROJECT_SLUG, splitImportId, str, type ResourceType } from './types.js';

async function anyEnvOf(e: Engine, slug: string): Promise<string | undefined> {
  e.forget('project');
  return (await e.projects()).get(slug)?.envs?.list?.[0]?.project_env;
}

export const project: ResourceType = {
  typeName: 'kms_project',
  replaceOn: ['slug'],
  validate(config: TfObject, d: Diagnostics) {
    check(d, config, 'slug', 'Invalid project slug', matches(PROJECT_SLUG, '1-50 lower-case letters, digits or inner hyphens, e.g. acme'));
    check(d, config, 'name', 'Invalid project name', (v) => (String(v).trim() ? undefined : 'must not be empty'));
  },
  planKnown: (p) => ({ id: p.slug ?? null }),
  parseImportId: (id) => {
    const [slug] = splitImportId(id, ['slug'], 'acme');
    return { slug: slug!, id: slug! };
  },

  async create(e, p) {
    const [slug] = ids(p, 'slug');
    e.forget('project');
    if ((await e.projects()).has(slug!)) {
      throw new DiagnosticError('Project already exists', `project ${slug} exists in the service: import it (terraform import kms_project.<name> ${slug}) instead of creating it`, ['slug']);
    }
    e.pendingProjects.set(slug!, { name: str(p.name)!, ...(str(p.description) !== undefined ? { description: str(p.description)! } : {}) });
    return { ...p, id: slug! };
  },

  async read(e, s, importing) {
    const [slug] = ids(s, 'slug');
    const live = (await e.projects()).get(slug!);
    if (!live) return e.pendingProjects.has(slug!) ? s : null;
    return {
      ...s, id: slug!, slug: slug!, name: live.name ?? s.name ?? slug!,
      // Sent on create only (the API cannot change it): the configured value stays.
      description: importing ? (live.description || null) : s.description ?? null,
    };
  },

  async update(e, prior, planned) {
    const [slug] = ids(planned, 'slug');
    const pending = e.pendingProjects.get(slug!);
    if (pending) {
      e.pendingProjects.set(slug!, { ...pending, name: str(planned.name)! });
      return planned;
    }
    if (planned.name !== prior.name) {
      const anyEnv = await anyEnvOf(e, slug!);
      const { projects } = await handlers();
      if (!anyEnv) throw new DiagnosticError('Project has no environment', `project ${slug} can only be renamed through one of its environments; it has none`);
      await e.change(undefined, anyEnv, (ctx) => projects.renameProject(ctx, anyEnv, str(planned.name)!));
      e.forget('project');
    }
    return planned;
  },

  async delete(e, prior) {
    const [slug] = ids(prior, 'slug');
    e.pendingProjects.delete(slug!);
    const anyEnv = await anyEnvOf(e, slug!);
    if (!anyEnv) return; // never created, or gone already
    const { projects } = await handlers();
    await e.change(undefined, anyEnv, (ctx) => projects.deleteProject(ctx, anyEnv));
    e.forget('project');
  },
};
