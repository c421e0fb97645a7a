// kms_project: a project, identified by its slug. The API has no project without an environment:
// a create is recorded, and the first kms_environment of the project creates both in one POST.
// Projects carry no metadata: whose one is follows from what its environments hold
// (model/ownership.ts `ownershipByContents`, as for environments): a create of one that exists
// adopts it only when it is this configuration's. A project is deleted with its last environment;
// its own delete never removes environments (another configuration's, or ones nobody declared).
import { address } from '../../model/index.js';
import { ownershipByContents } from '../../model/ownership.js';
import { DiagnosticError, type Diagnostics } from '../diagnostics.js';
import type { Engine } from '../engine.js';
import { envContents } from './holdings.js';
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
    check(
      d,
      config,
      'slug',
      'Invalid project slug',
      matches(PROJECT_SLUG, '1-50 lower-case letters, digits or inner hyphens, e.g. acme'),
    );
    check(d, config, 'name', 'Invalid project name', (v) => (String(v).trim() ? undefined : 'must not be empty'));
  },
  planKnown: (p) => ({ id: p.slug ?? null }),
  parseImportId: (id) => {
    const [slug] = splitImportId(id, ['slug'], 'acme');
    return { slug: slug!, id: slug! };
  },

  /** A create of a project that exists is checked at plan time too (the shared listings). */
  async guard(e, _prior, planned, action) {
    if (action !== 'create' || !planned || typeof planned.slug !== 'string') return;
    const live = (await e.projects()).get(planned.slug);
    if (!live) return;
    const holdings = [];
    for (const env of live.envs?.list ?? []) holdings.push(...(await envContents(e, env.project_env, false)).holdings);
    e.checkContents(
      { type: 'kms_project', address: planned.slug, importId: planned.slug },
      ownershipByContents(holdings, e.config.owner, e.config.takeOwnership),
      'create',
    );
  },

  async create(e, p) {
    const [slug] = ids(p, 'slug');
    e.forget('project');
    const live = (await e.projects()).get(slug!);
    if (live) {
      // It exists: adopted when what its environments hold is this configuration's, refused otherwise.
      const holdings = [];
      for (const env of live.envs?.list ?? []) holdings.push(...(await envContents(e, env.project_env, true)).holdings);
      const o = ownershipByContents(holdings, e.config.owner, e.config.takeOwnership);
      e.checkContents({ type: 'kms_project', address: slug!, importId: slug! }, o, 'create');
      if (str(p.name) !== undefined && live.name !== str(p.name) && live.envs?.list?.[0]) {
        const anyEnv = live.envs.list[0].project_env;
        const { projects } = await handlers();
        await e.change(undefined, anyEnv, (ctx) => projects.renameProject(ctx, anyEnv, str(p.name)!));
        e.forget('project');
      }
      return { ...p, id: slug! };
    }
    e.pendingProjects.set(slug!, {
      name: str(p.name)!,
      ...(str(p.description) !== undefined ? { description: str(p.description)! } : {}),
    });
    return { ...p, id: slug! };
  },

  async read(e, s, importing, d) {
    const [slug] = ids(s, 'slug');
    const live = (await e.projects()).get(slug!);
    if (!live && !e.pendingProjects.has(slug!)) {
      // Recorded by a create, but no environment came with it (or it was deleted outside):
      // Terraform plans the create again, and says why.
      d?.warning(
        'Project not in the service',
        `kms_project ${slug} does not exist in the service. The API has no project without an environment: a kms_project is created together with ` +
          `its first kms_environment (project = kms_project.<name>.slug). Declare one in this configuration; until then every plan creates the project again.`,
      );
      return null;
    }
    if (!live) return s;
    return {
      ...s,
      id: slug!,
      slug: slug!,
      name: live.name ?? s.name ?? slug!,
      // Sent on create only (the API cannot change it): the configured value stays.
      description: importing ? live.description || null : (s.description ?? null),
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
      if (!anyEnv)
        throw new DiagnosticError(
          'Project has no environment',
          `project ${slug} can only be renamed through one of its environments; it has none`,
        );
      await e.change(undefined, anyEnv, (ctx) => projects.renameProject(ctx, anyEnv, str(planned.name)!));
      e.forget('project');
    }
    return planned;
  },

  async delete(e, prior, d) {
    const [slug] = ids(prior, 'slug');
    e.pendingProjects.delete(slug!);
    e.forget('project');
    const envs = (await e.projects()).get(slug!)?.envs?.list ?? [];
    if (envs.length === 0) return; // never created, or gone already (with its last environment)
    // Environments are left: this configuration's went first (each references its project) and
    // the last of them took the project along, so these are another configuration's or nobody's
    // declared. They keep the project (the API has no project without an environment).
    d?.warning(
      'Project kept',
      `${address.project(slug!)} is removed from this configuration's state but kept in the service: it still has ${envs.length} environment(s) ` +
        `this configuration does not manage (${envs
          .slice(0, 5)
          .map((x) => x.project_env)
          .join(', ')}). The last of them to be deleted deletes the project.`,
    );
  },
};
