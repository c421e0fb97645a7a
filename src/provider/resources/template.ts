// kms_template: a plan of an environment (rate limit, client maximum), identified by (env, name).
// Templates carry no metadata: whose one is follows from the clients that use it
// (plan/kinds/template.ts, the rule `kms-sync plan` follows): a create of one that exists adopts it
// only when this configuration's clients use it and no other configuration's do; another
// configuration's template is never changed nor deleted.
import { templateOwnership, templateUsers } from '../../plan/kinds/template.js';
import type { Diagnostics } from '../diagnostics.js';
import type { ChangeAction, Engine } from '../engine.js';
import { envContents } from './holdings.js';
import { UNKNOWN, isUnknown, type TfObject } from '../values/types.js';
import { handlers } from './state.js';
import { check, ids, matches, num, PROJECT_ENV, splitImportId, type ResourceType } from './types.js';

export const idOf2 = (p: TfObject, a: string, b: string) =>
  isUnknown(p[a]) || isUnknown(p[b])
    ? UNKNOWN
    : typeof p[a] === 'string' && typeof p[b] === 'string'
      ? `${p[a]}/${p[b]}`
      : null;

const wholeNumber = (min: number) => (v: unknown) =>
  typeof v === 'number' && Number.isInteger(v) && v >= min
    ? undefined
    : `must be a whole number >= ${min}, got ${String(v)}`;

async function write(e: Engine, p: TfObject, id?: string): Promise<TfObject> {
  const [projectEnv, name] = ids(p, 'project_env', 'name');
  const maxClients = num(p.max_clients);
  const { templates } = await handlers();
  await e.change(undefined, projectEnv!, (ctx) =>
    templates.upsertTemplates(ctx, projectEnv!, [
      {
        ...(id ? { id } : {}),
        name: name!,
        rateLimitDay: num(p.rate_limit_day)!,
        ...(maxClients !== undefined ? { maxClients } : {}),
      },
    ]),
  );
  e.forget('template', projectEnv!);
  const live = (await e.templatesOf(projectEnv!)).get(name!);
  return { ...p, id: `${projectEnv}/${name}`, template_id: live?.id ?? null };
}

/** The ownership rule for a change of an existing template; `fresh`: on fresh listings (apply), else the plan's. */
async function checkTemplate(
  e: Engine,
  projectEnv: string,
  name: string,
  action: ChangeAction,
  fresh: boolean,
): Promise<void> {
  if (fresh) e.forget('template', projectEnv);
  const live = (await e.templatesOf(projectEnv)).get(name);
  if (!live) return;
  const contents = await envContents(e, projectEnv, fresh);
  const users = templateUsers(
    contents.clients.map((c) => ({
      projectEnv,
      name: c.name,
      templateId: c.templateId ?? null,
      metadata: (c.metadata ?? {}) as never,
    })),
    live,
  );
  e.checkContents(
    { type: 'kms_template', address: `${projectEnv}/${name}`, importId: `${projectEnv}/${name}` },
    templateOwnership(users, e.config.owner, e.config.takeOwnership),
    action,
  );
}

export const template: ResourceType = {
  typeName: 'kms_template',
  replaceOn: ['project_env', 'name'],
  validate(config: TfObject, d: Diagnostics) {
    check(
      d,
      config,
      'project_env',
      'Invalid project_env',
      matches(PROJECT_ENV, '<project>-<type>, e.g. acme-production'),
    );
    check(d, config, 'name', 'Invalid template name', (v) => (String(v).trim() ? undefined : 'must not be empty'));
    check(d, config, 'rate_limit_day', 'Invalid rate_limit_day', wholeNumber(0));
    check(d, config, 'max_clients', 'Invalid max_clients', wholeNumber(1));
  },
  planKnown: (p) => ({ id: idOf2(p, 'project_env', 'name') }),
  parseImportId: (id) => {
    const [projectEnv, name] = splitImportId(id, ['project_env', 'name'], 'acme-production/gold');
    return { id, project_env: projectEnv!, name: name! };
  },

  /** A create of a template that exists, or a change of another configuration's, is refused at plan time (the shared listings). */
  async guard(e, prior, planned, action) {
    const s = prior ?? planned;
    if (!s || typeof s.project_env !== 'string' || typeof s.name !== 'string') return;
    await checkTemplate(e, s.project_env, s.name, action, false);
  },

  async create(e, p) {
    const [projectEnv, name] = ids(p, 'project_env', 'name');
    await checkTemplate(e, projectEnv!, name!, 'create', true);
    return write(e, p);
  },
  async update(e, prior, planned) {
    const [projectEnv, name] = ids(prior, 'project_env', 'name');
    await checkTemplate(e, projectEnv!, name!, 'update', true);
    return write(e, planned, typeof prior.template_id === 'string' ? prior.template_id : undefined);
  },

  async read(e, s, importing) {
    const [projectEnv, name] = ids(s, 'project_env', 'name');
    const live = (await e.templatesOf(projectEnv!)).get(name!);
    if (!live) return null;
    return {
      ...s,
      id: `${projectEnv}/${name}`,
      template_id: live.id,
      rate_limit_day: live.rateLimitDay ?? null,
      // Optional: left unset, it stays unset whatever the service fills in.
      max_clients: s.max_clients === null && !importing ? null : (live.maxClients ?? null),
    };
  },

  async delete(e, prior) {
    const [projectEnv, name] = ids(prior, 'project_env', 'name');
    e.forget('template', projectEnv!);
    const live = (await e.templatesOf(projectEnv!)).get(name!);
    if (!live) return;
    await checkTemplate(e, projectEnv!, name!, 'delete', true);
    const { templates } = await handlers();
    await e.change(undefined, projectEnv!, (ctx) => templates.deleteTemplate(ctx, projectEnv!, live.id));
    e.forget('template', projectEnv!);
  },
};
