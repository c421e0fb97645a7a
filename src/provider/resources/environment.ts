// kms_environment: an environment of a project, identified by `<project>-<type>`. The first
// environment of a recorded kms_project creates the project; deleting the last one deletes it.
import { DiagnosticError, type Diagnostics } from '../diagnostics.js';
import type { Engine } from '../engine.js';
import { UNKNOWN, isUnknown, type TfObject } from '../values/types.js';
import { handlers } from './state.js';
import { check, ENV_TYPE, ids, ImportIdError, matches, PROJECT_SLUG, splitImportId, type ResourceType } from './types.js';

const projectEnvOf = (p: TfObject) => (isUnknown(p.project) || isUnknown(p.type) ? UNKNOWN : typeof p.project === 'string' && typeof p.type === 'string' ? `${p.project}-${p.type}` : null);

async function liveEnv(e: Engine, project: string, projectEnv: string) {
  const summary = (await e.projects()).get(project);
  if (!summary?.envs?.list?.some((x) => x.project_env === projectEnv)) return undefined;
  // The listing has no URL: one GET of the project, shared by its environments.
  const full = await e.projectFull(project, projectEnv);
  return full?.envs?.list?.find((x) => x.project_env === projectEnv);
}

export const environment: ResourceType = {
  typeName: 'kms_environment',
  replaceOn: ['project', 'type'],
  validate(config: TfObject, d: Diagnostics) {
    check(d, config, 'project', 'Invalid project slug', matches(PROJECT_SLUG, 'a project slug, e.g. acme'));
    check(d, config, 'type', 'Invalid environment type', matches(ENV_TYPE, '1-20 lower-case letters or digits starting with a letter, e.g. production'));
    check(d, config, 'url', 'Invalid url', (v) => {
      try {
        new URL(String(v));
        return undefined;
      } catch {
        return `${JSON.stringify(v)} is not a URL, e.g. https://api.acme.example`;
      }
    });
  },
  planKnown: (p) => ({ id: projectEnvOf(p), project_env: projectEnvOf(p) }),
  parseImportId: (id) => {
    const [projectEnv] = splitImportId(id, ['project_env'], 'acme-production');
    // The type is the part after the last hyphen: slugs may hold hyphens, types may not.
    const at = projectEnv!.lastIndexOf('-');
    if (at <= 0) throw new ImportIdError(`import id ${JSON.stringify(id)} is not <project>-<type>, e.g. acme-production`);
    return { id: projectEnv!, project_env: projectEnv!, project: projectEnv!.slice(0, at), type: projectEnv!.slice(at + 1) };
  },

  async create(e, p) {
    const [project, type, url] = ids(p, 'project', 'type', 'url');
    const projectEnv = `${project}-${type}`;
    // One at a time per project: two new environments of a new project must not both create it.
    return e.exclusive(`project ${project}`, async () => {
      e.forget('project');
      const exists = (await e.projects()).has(project!);
      const { envs, projects } = await handlers();
      await e.change(undefined, projectEnv, async (ctx) => {
        if (exists) return envs.upsertEnv(ctx, projectEnv, { url: url! });
        const pending = e.pendingProjects.get(project!);
        if (!pending) {
          throw new DiagnosticError('Project not found', `project ${project} does not exist: declare it as a kms_project (and reference kms_project.<name>.slug) or create it first`, ['project']);
        }
        await projects.createProject(ctx, { slug: project!, name: pending.name, ...(pending.description !== undefined ? { description: pending.description } : {}), envs: [{ type: type!, url: url!, templates: [] }] });
        e.pendingProjects.delete(project!);
      });
      e.forget('project');
      const live = await liveEnv(e, project!, projectEnv);
      return { ...p, id: projectEnv, project_env: projectEnv, env_id: live?.id ?? null };
    });
  },

  async read(e, s) {
    const [project, type] = ids(s, 'project', 'type');
    const projectEnv = `${project}-${type}`;
    const live = await liveEnv(e, project!, projectEnv);
    if (!live) return null;
    return { ...s, id: projectEnv, project_env: projectEnv, url: live.url ?? s.url ?? null, env_id: live.id ?? null };
  },

  async update(e, _prior, planned) {
    const [project, type, url] = ids(planned, 'project', 'type', 'url');
    const projectEnv = `${project}-${type}`;
    const { envs } = await handlers();
    await e.change(undefined, projectEnv, (ctx) => envs.upsertEnv(ctx, projectEnv, { url: url! }));
    e.forget('project');
    return planned;
  },

  async delete(e, prior) {
    const [project, type] = ids(prior, 'project', 'type');
    const projectEnv = `${project}-${type}`;
    // One at a time per project: of two environments deleted at once, exactly one is the last.
    await e.exclusive(`project ${project}`, async () => {
      e.forget('project');
      const live = await liveEnv(e, project!, projectEnv);
      if (!live?.id) return;
      // The API has no project without an environment: the last one goes with its project (whose
      // own delete then finds nothing left), as the first one came with it.
      const last = ((await e.projects()).get(project!)?.envs?.list ?? []).length <= 1;
      const { envs, projects } = await handlers();
      await e.change(undefined, projectEnv, (ctx) => (last ? projects.deleteProject(ctx, projectEnv) : envs.deleteEnv(ctx, projectEnv, live.id!)));
      e.forget('project');
    });
  },
};
