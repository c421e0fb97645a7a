// kms_environment: an environment of a project, identified by `<project>-<type>`. The first
// environment of a recorded kms_project creates the project; deleting the last one deletes it.
// Environments carry no metadata: whose one is follows from what it holds (plan/kinds/env.ts, the
// rules `kms-sync plan` follows): a create of one that exists adopts it only when it holds this
// configuration's objects and nothing of another's; a delete keeps one that holds another
// configuration's objects (or protected ones, or ones kms-sync did not make), with a warning.
import { address } from '../../model/index.js';
import { envOwnership, keepsEnv } from '../../plan/kinds/env.js';
import { DiagnosticError, type Diagnostics } from '../diagnostics.js';
import type { ChangeAction, Engine } from '../engine.js';
import { envContents } from './holdings.js';
import { UNKNOWN, isUnknown, type TfObject } from '../values/types.js';
import { handlers, uuidOf } from './state.js';
import {
  check,
  ENV_TYPE,
  ids,
  ImportIdError,
  matches,
  PROJECT_SLUG,
  splitImportId,
  type ResourceType,
} from './types.js';

const projectEnvOf = (p: TfObject) =>
  isUnknown(p.project) || isUnknown(p.type)
    ? UNKNOWN
    : typeof p.project === 'string' && typeof p.type === 'string'
      ? `${p.project}-${p.type}`
      : null;

async function liveEnv(e: Engine, project: string, projectEnv: string) {
  const summary = (await e.projects()).get(project);
  if (!summary?.envs?.list?.some((x) => x.project_env === projectEnv)) return undefined;
  // The listing has no URL: one GET of the project, shared by its environments.
  const full = await e.projectFull(project, projectEnv);
  return full?.envs?.list?.find((x) => x.project_env === projectEnv);
}

const what = (projectEnv: string) => ({ type: 'kms_environment', address: projectEnv, importId: projectEnv });

/** The ownership rule for a change of an existing environment: refused unless it is this configuration's to change. */
async function checkEnv(e: Engine, projectEnv: string, action: ChangeAction, fresh: boolean): Promise<void> {
  const { holdings } = await envContents(e, projectEnv, fresh);
  e.checkContents(what(projectEnv), envOwnership(holdings, e.config.owner, e.config.takeOwnership), action);
}

export const environment: ResourceType = {
  typeName: 'kms_environment',
  replaceOn: ['project', 'type'],
  validate(config: TfObject, d: Diagnostics) {
    check(d, config, 'project', 'Invalid project slug', matches(PROJECT_SLUG, 'a project slug, e.g. acme'));
    check(
      d,
      config,
      'type',
      'Invalid environment type',
      matches(ENV_TYPE, '1-20 lower-case letters or digits starting with a letter, e.g. production'),
    );
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
    if (at <= 0)
      throw new ImportIdError(`import id ${JSON.stringify(id)} is not <project>-<type>, e.g. acme-production`);
    return {
      id: projectEnv!,
      project_env: projectEnv!,
      project: projectEnv!.slice(0, at),
      type: projectEnv!.slice(at + 1),
    };
  },

  /** A create of an environment that exists, or a change of one, is checked at plan time (the shared listings). */
  async guard(e, prior, planned, action) {
    const s = prior ?? planned;
    if (!s || typeof s.project !== 'string' || typeof s.type !== 'string') return;
    const projectEnv = `${s.project}-${s.type}`;
    if (
      action === 'create' &&
      !(await e.projects()).get(s.project)?.envs?.list?.some((x) => x.project_env === projectEnv)
    )
      return;
    if (action !== 'delete') await checkEnv(e, projectEnv, action, false);
  },

  async create(e, p) {
    const [project, type, url] = ids(p, 'project', 'type', 'url');
    const projectEnv = `${project}-${type}`;
    // One at a time per project: two new environments of a new project must not both create it.
    return e.exclusive(`project ${project}`, async () => {
      e.forget('project');
      const exists = (await e.projects()).has(project!);
      // It exists already: adopted when it is this configuration's, refused otherwise.
      if (exists && (await liveEnv(e, project!, projectEnv))) await checkEnv(e, projectEnv, 'create', true);
      const { envs, projects } = await handlers();
      await e.change(undefined, projectEnv, async (ctx) => {
        if (exists) return envs.upsertEnv(ctx, projectEnv, { url: url! });
        const pending = e.pendingProjects.get(project!);
        if (!pending) {
          throw new DiagnosticError(
            'Project not found',
            `project ${project} does not exist: declare it as a kms_project (and reference kms_project.<name>.slug) or create it first`,
            ['project'],
          );
        }
        await projects.createProject(ctx, {
          slug: project!,
          name: pending.name,
          ...(pending.description !== undefined ? { description: pending.description } : {}),
          envs: [{ type: type!, url: url!, templates: [] }],
        });
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
    await checkEnv(e, projectEnv, 'update', true);
    const { envs } = await handlers();
    await e.change(undefined, projectEnv, (ctx) => envs.upsertEnv(ctx, projectEnv, { url: url! }));
    e.forget('project');
    return planned;
  },

  async delete(e, prior, d) {
    const [project, type] = ids(prior, 'project', 'type');
    const projectEnv = `${project}-${type}`;
    // One at a time per project: of two environments deleted at once, exactly one is the last.
    await e.exclusive(`project ${project}`, async () => {
      e.forget('project');
      const live = await liveEnv(e, project!, projectEnv);
      if (!live?.id) return;
      // What it still holds (this configuration's own resources went first, by their references):
      // another configuration's objects, protected ones or ones kms-sync did not make keep it, as
      // they keep an environment `kms-sync destroy` removes (plan/removal.ts).
      const contents = await envContents(e, projectEnv, true);
      const blockers = contents.holdings
        .map((h) => keepsEnv(h, e.config.owner, false))
        .filter((b): b is string => b !== undefined);
      if (blockers.length) {
        d?.warning(
          'Environment kept',
          `${address.env(projectEnv)} is removed from this configuration's state but kept in the service: ${blockers.slice(0, 5).join('; ')}${blockers.length > 5 ? `; and ${blockers.length - 5} more` : ''}.`,
        );
        return;
      }
      const { envs, projects, clients, endpoints } = await handlers();
      // This configuration's own objects that no state tracks go first, so the service is never asked to force a delete.
      for (const c of contents.clients)
        await e.change(undefined, projectEnv, (ctx) => clients.deleteClient(ctx, uuidOf(c), projectEnv));
      for (const x of contents.endpoints)
        await e.change(undefined, projectEnv, (ctx) => endpoints.deleteEndpoint(ctx, projectEnv, x.method, x.path));
      // The API has no project without an environment: the last one goes with its project (whose
      // own delete then finds nothing left), as the first one came with it.
      e.forget('project');
      const last = ((await e.projects()).get(project!)?.envs?.list ?? []).length <= 1;
      await e.change(undefined, projectEnv, (ctx) =>
        last ? projects.deleteProject(ctx, projectEnv) : envs.deleteEnv(ctx, projectEnv, live.id!),
      );
      e.forget('project');
      e.forget('client', projectEnv);
      e.forget('endpoint', projectEnv);
    });
  },
};
