// Data sources: read-only views of live objects by natural id, and lists of an environment's
// objects (kms_projects, kms_templates, kms_clients, kms_endpoints), from the same shared listings
// as ReadResource. Never a raw key: keys are listed by id, name, expiry and dates.
import type { WireEndpoint } from '../../api/client.js';
import { methodPath } from '../../model/index.js';
import { OWNER_ID_KEY } from '../../model/ownership.js';
import { DiagnosticError } from '../diagnostics.js';
import type { Engine } from '../engine.js';
import type { TfObject, TfValue } from '../values/types.js';
import { userMetadata, uuidOf } from './state.js';
import { check, ids, matches, PROJECT_ENV, PROJECT_SLUG, type DataSourceType } from './types.js';

const notFound = (what: string, attr: string) =>
  new DiagnosticError('Not found', `${what} does not exist in the service`, [attr]);
const projectEnvCheck: DataSourceType['validate'] = (c, d) =>
  check(d, c, 'project_env', 'Invalid project_env', matches(PROJECT_ENV, '<project>-<type>, e.g. acme-production'));

async function envOf(e: Engine, projectEnv: string) {
  for (const p of (await e.projects()).values()) {
    const env = p.envs?.list?.find((x) => x.project_env === projectEnv);
    if (env) {
      const full = await e.projectFull(p.slug, projectEnv);
      return { project: p.slug, env: full?.envs?.list?.find((x) => x.project_env === projectEnv) ?? env };
    }
  }
  return undefined;
}

const byName = <T>(m: Map<string, T>) => [...m.entries()].sort(([a], [b]) => a.localeCompare(b)).map(([, v]) => v);

export const dataSources: DataSourceType[] = [
  {
    typeName: 'kms_project',
    validate: (c, d) => check(d, c, 'slug', 'Invalid project slug', matches(PROJECT_SLUG, 'a project slug, e.g. acme')),
    async read(e, c) {
      const [slug] = ids(c, 'slug');
      const p = (await e.projects()).get(slug!);
      if (!p) throw notFound(`project ${slug}`, 'slug');
      return {
        id: slug!,
        slug: slug!,
        name: p.name ?? null,
        description: p.description ?? null,
        environments: (p.envs?.list ?? []).map((x) => x.project_env),
      };
    },
  },
  {
    typeName: 'kms_environment',
    validate: projectEnvCheck,
    async read(e, c) {
      const [projectEnv] = ids(c, 'project_env');
      const found = await envOf(e, projectEnv!);
      if (!found) throw notFound(`environment ${projectEnv}`, 'project_env');
      return {
        id: projectEnv!,
        project_env: projectEnv!,
        project: found.project,
        type: found.env.type ?? null,
        url: found.env.url ?? null,
        env_id: found.env.id ?? null,
      };
    },
  },
  {
    typeName: 'kms_template',
    validate: projectEnvCheck,
    async read(e, c) {
      const [projectEnv, name] = ids(c, 'project_env', 'name');
      const t = (await e.templatesOf(projectEnv!)).get(name!);
      if (!t) throw notFound(`template ${projectEnv}/${name}`, 'name');
      return {
        id: `${projectEnv}/${name}`,
        project_env: projectEnv!,
        name: name!,
        rate_limit_day: t.rateLimitDay ?? null,
        max_clients: t.maxClients ?? null,
        template_id: t.id,
      };
    },
  },
  {
    typeName: 'kms_client',
    validate: projectEnvCheck,
    async read(e, c) {
      const [projectEnv, name] = ids(c, 'project_env', 'name');
      const live = (await e.clientsOf(projectEnv!)).get(name!);
      if (!live) throw notFound(`client ${projectEnv}/${name}`, 'name');
      e.refuseDuplicateClient(projectEnv!, name!);
      const template = [...(await e.templatesOf(projectEnv!)).values()].find((t) => t.id === live.templateId);
      return {
        id: `${projectEnv}/${name}`,
        project_env: projectEnv!,
        name: name!,
        type: live.type ?? null,
        template: template?.name ?? null,
        ip_whitelist: live.ipWhitelist ?? [],
        metadata: userMetadata(live.metadata) as TfValue,
        client_uuid: uuidOf(live),
        keys: (live.keys ?? []).map((k) => ({
          name: k.name,
          key_id: k.id,
          expires_at: k.expiresAt ?? null,
          auto_rotate: k.autoRotate ?? null,
          created_at: k.createdAt ?? null,
        })),
      } satisfies TfObject;
    },
  },
  {
    typeName: 'kms_key',
    validate: projectEnvCheck,
    async read(e, c) {
      const [projectEnv, client, name] = ids(c, 'project_env', 'client', 'name');
      const live = (await e.clientsOf(projectEnv!)).get(client!);
      if (!live) throw notFound(`client ${projectEnv}/${client}`, 'client');
      e.refuseDuplicateClient(projectEnv!, client!);
      const gens = (live.keys ?? [])
        .filter((k) => k.name === name)
        .sort((a, b) => String(b.createdAt ?? '').localeCompare(String(a.createdAt ?? '')));
      const k = gens[0];
      if (!k) throw notFound(`key ${name} of client ${projectEnv}/${client}`, 'name');
      return {
        id: `${projectEnv}/${client}/${name}`,
        project_env: projectEnv!,
        client: client!,
        name: name!,
        key_id: k.id,
        expires_at: k.expiresAt ?? null,
        auto_rotate: k.autoRotate ?? null,
        created_at: k.createdAt ?? null,
        generations: gens.length,
      };
    },
  },
  {
    typeName: 'kms_projects',
    validate: () => undefined,
    async read(e) {
      const projects = byName(await e.projects());
      return {
        id: 'projects',
        projects: projects.map((p) => ({
          slug: p.slug,
          name: p.name ?? null,
          environments: (p.envs?.list ?? []).map((x) => x.project_env),
        })),
      };
    },
  },
  {
    typeName: 'kms_templates',
    validate: projectEnvCheck,
    async read(e, c) {
      const [projectEnv] = ids(c, 'project_env');
      const templates = byName(await e.templatesOf(projectEnv!));
      return {
        id: projectEnv!,
        project_env: projectEnv!,
        templates: templates.map((t) => ({
          name: t.name,
          template_id: t.id,
          rate_limit_day: t.rateLimitDay ?? null,
          max_clients: t.maxClients ?? null,
        })),
      };
    },
  },
  {
    typeName: 'kms_clients',
    validate: projectEnvCheck,
    async read(e, c) {
      const [projectEnv] = ids(c, 'project_env');
      const templateNames = new Map([...(await e.templatesOf(projectEnv!)).values()].map((t) => [t.id, t.name]));
      const only = typeof c.template === 'string' ? c.template : undefined;
      // Every live client, by name then id: two clients may share a name (another template, a
      // manual create), and a list that folded them into one would hide a client from its reader.
      const clients = (await e.clientListOf(projectEnv!))
        .toSorted((a, b) => a.name.localeCompare(b.name) || uuidOf(a).localeCompare(uuidOf(b)))
        .map((x) => ({ x, template: templateNames.get(x.templateId ?? '') ?? null }))
        .filter(({ template }) => only === undefined || template === only);
      return {
        id: projectEnv!,
        project_env: projectEnv!,
        template: only ?? null,
        clients: clients.map(({ x, template }) => {
          const owner = (x.metadata as Record<string, unknown> | undefined)?.[OWNER_ID_KEY];
          return {
            name: x.name,
            client_uuid: uuidOf(x),
            type: x.type ?? null,
            template,
            ip_whitelist: x.ipWhitelist ?? [],
            key_names: [...new Set((x.keys ?? []).map((k) => k.name))].sort(),
            owner: typeof owner === 'string' ? owner : null,
          };
        }),
      };
    },
  },
  {
    typeName: 'kms_endpoints',
    validate: projectEnvCheck,
    async read(e, c) {
      const [projectEnv] = ids(c, 'project_env');
      const endpoints = byName(await e.endpointsOf(projectEnv!));
      return {
        id: projectEnv!,
        project_env: projectEnv!,
        endpoints: endpoints.map((x) => ({
          method: x.method,
          path: x.path,
          method_path: methodPath(x.method, x.path),
          name: x.name ?? null,
          description: x.description ?? null,
        })),
      };
    },
  },
  {
    typeName: 'kms_endpoint',
    validate: projectEnvCheck,
    async read(e, c) {
      const [projectEnv, method, path] = ids(c, 'project_env', 'method', 'path');
      const live: WireEndpoint | undefined = (await e.endpointsOf(projectEnv!)).get(methodPath(method!, path!));
      if (!live) throw notFound(`endpoint ${projectEnv}/${methodPath(method!, path!)}`, 'path');
      const stats = (live as { stats?: { total?: number; success?: number; error?: number } }).stats;
      return {
        id: `${projectEnv}/${methodPath(live.method, live.path)}`,
        project_env: projectEnv!,
        method: method!,
        path: path!,
        name: live.name ?? null,
        description: live.description ?? null,
        request: (live.request ?? null) as TfValue,
        response: (live.response ?? null) as TfValue,
        metadata: userMetadata(live.metadata) as TfValue,
        method_path: methodPath(live.method, live.path),
        stats: stats ? { total: stats.total ?? 0, success: stats.success ?? 0, error: stats.error ?? 0 } : null,
      };
    },
  },
];
