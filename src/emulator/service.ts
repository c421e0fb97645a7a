// The emulated key-management service: domain state and operations, independent of HTTP.
// Choices for what the interface leaves open are in docs/contract-decisions.md and the contract.
import { createHash, randomBytes, randomUUID, timingSafeEqual } from 'node:crypto';
import { canonicalCidrSet, cidrContains, NormalizeError } from '../model/normalize.js';
import { SERVICE_DEFAULT_MAX_CLIENTS } from '../model/resources.js';
import { ApiError, badRequest, conflict, notFound } from './errors.js';
import { checkDepth, checkObject, type FieldRule } from './validate.js';

export const CUSTOMER_KEY_PREFIX = 'kmsc_';
export const MAX_LIMIT = 100;
export const MAX_BULK = 100;
export const DEFAULT_MAX_CLIENTS = SERVICE_DEFAULT_MAX_CLIENTS;
const SLUG = /^[a-z0-9]([a-z0-9-]{0,48}[a-z0-9])?$/;
const ENV_TYPE = /^[a-z][a-z0-9]{0,19}$/;
const CLIENT_TYPE = /^[a-z][a-z0-9_-]{0,31}$/;
const METHODS = ['GET', 'POST', 'PUT', 'PATCH', 'DELETE', 'HEAD', 'OPTIONS'];

type Json = unknown;
type Obj = Record<string, unknown>;

export interface Template {
  id: string;
  name: string;
  rateLimitDay: number;
  maxClients: number;
  createdAt: string;
  updatedAt: string;
}

export interface Key {
  id: string;
  name: string;
  expiresAt: string | null;
  autoRotate: boolean;
  /** SHA-256 of the raw key; the raw key is never stored. */
  hash: string;
  keyPrefix: string;
  createdAt: string;
}

export interface Stats {
  total: number;
  success: number;
  error: number;
}

export interface Client {
  id: string;
  name: string;
  type: string;
  templateId: string | null;
  ipWhitelist: string[];
  metadata: Obj;
  keys: Key[];
  createdAt: string;
  updatedAt: string;
  stats: Stats;
  /** Calls counted against the template's daily limit, per UTC day. */
  usage: { day: string; count: number };
}

export interface Endpoint {
  method: string;
  path: string;
  name: string;
  description: string;
  request: Obj;
  response: Obj;
  metadata: Obj;
  stats: Stats;
  createdAt: string;
  updatedAt: string;
}

export interface LogEntry {
  id: string;
  clientId: string;
  status: 'success' | 'error';
  durationMs: number;
  timestamp: string;
  method_path: string;
  name: string;
  reason?: string;
}

export interface Env {
  id: string;
  project: string;
  projectEnv: string;
  type: string;
  url: string;
  createdAt: string;
  templates: Map<string, Template>;
  clients: Map<string, Client>;
  endpoints: Map<string, Endpoint>;
  logs: LogEntry[];
  /** Cached insertion-ordered client array for O(limit) paging; appended to on create, dropped on delete. */
  clientList?: Client[];
  /**
   * Whole unfiltered client-list pages as sent, by `page limit` (not persisted). Every page shows the
   * total, so any change to the list's members or to a listed client's fields drops them all.
   */
  clientPages?: Map<string, JsonText>;
  /** Clients per template id, counted once and then kept up to date (not persisted). */
  templateUse?: Map<string, number>;
}

export interface Project {
  slug: string;
  name: string;
  description: string;
  status: string;
  createdAt: string;
  updatedAt: string;
  envs: Map<string, Env>;
}

export interface Page<T> {
  data: T[];
  pagination: { total: number; page: number; limit: number; pages: number };
}

export function paginate<T>(items: readonly T[], page: number, limit: number): Page<T> {
  const effective = Math.min(limit, MAX_LIMIT);
  const start = (page - 1) * effective;
  return {
    data: items.slice(start, start + effective),
    pagination: { total: items.length, page, limit: effective, pages: Math.ceil(items.length / effective) },
  };
}

const now = () => new Date().toISOString();
const hashKey = (raw: string) => createHash('sha256').update(raw).digest('hex');
const utcDay = (d = new Date()) => d.toISOString().slice(0, 10);

function cidrs(list: string[], path: string): string[] {
  try {
    return canonicalCidrSet(list);
  } catch (e) {
    if (e instanceof NormalizeError) throw badRequest(`${path}: ${e.message}`);
    throw e;
  }
}

function timestampOrNull(value: unknown, path: string): string | null {
  if (value === undefined || value === null) return null;
  const ms = Date.parse(value as string);
  if (typeof value !== 'string' || Number.isNaN(ms)) throw badRequest(`${path}: must be an ISO 8601 timestamp`);
  return new Date(ms).toISOString();
}

// ------------------------------------------------------------------ request body rules
const templateInputRule: FieldRule = {
  type: 'object',
  fields: {
    name: { type: 'string', required: true, min: 1, maxLength: 100 },
    rateLimitDay: { type: 'integer', required: true, min: 0 },
    maxClients: { type: 'integer', min: 0 },
  },
};
const templateUpdateRule: FieldRule = {
  type: 'object',
  fields: {
    id: { type: 'string' },
    name: { type: 'string', min: 1, maxLength: 100 },
    rateLimitDay: { type: 'integer', min: 0 },
    maxClients: { type: 'integer', min: 0 },
  },
};
const envTypeRule: FieldRule = {
  type: 'string',
  required: true,
  pattern: ENV_TYPE,
  patternHint: 'lower-case letters and digits, starting with a letter, no hyphen',
};
const urlRule: FieldRule = {
  type: 'string',
  pattern: /^https?:\/\/\S+$/,
  patternHint: 'an http(s) URL',
  maxLength: 2048,
};
const projectCreateFields: Record<string, FieldRule> = {
  slug: {
    type: 'string',
    required: true,
    pattern: SLUG,
    patternHint: 'lower-case letters, digits and hyphens, 1-50 characters',
  },
  name: { type: 'string', required: true, min: 1, maxLength: 200 },
  description: { type: 'string', maxLength: 2000 },
  envs: {
    type: 'array',
    required: true,
    min: 1,
    max: 20,
    items: {
      fields: {
        type: envTypeRule,
        url: { ...urlRule, required: true },
        templates: { type: 'array', items: templateInputRule },
      },
    },
  },
};
const projectUpdateFields: Record<string, FieldRule> = {
  name: { type: 'string', min: 1, maxLength: 200 },
  singleEnv: {
    type: 'object',
    fields: { url: urlRule, templates: { type: 'array', items: templateUpdateRule } },
  },
};
const keyCreateRule: FieldRule = {
  type: 'object',
  fields: {
    name: { type: 'string', required: true, min: 1, maxLength: 100 },
    expiresAt: { type: 'string', nullable: true },
    autoRotate: { type: 'boolean' },
  },
};
const keyUpsertRule: FieldRule = {
  type: 'object',
  fields: {
    id: { type: 'string' },
    name: { type: 'string', min: 1, maxLength: 100 },
    expiresAt: { type: 'string', nullable: true },
    autoRotate: { type: 'boolean' },
  },
};
const freeObject: FieldRule = { type: 'object', open: true };
const clientCreateFields: Record<string, FieldRule> = {
  name: { type: 'string', required: true, min: 1, maxLength: 200 },
  type: { type: 'string', pattern: CLIENT_TYPE, patternHint: 'lower-case identifier' },
  templateId: { type: 'string', required: true },
  ipWhitelist: { type: 'array', items: { type: 'string' }, max: 100 },
  metadata: freeObject,
  keys: { type: 'array', items: keyCreateRule, max: 20 },
};
const clientUpdateFields: Record<string, FieldRule> = {
  name: { type: 'string', min: 1, maxLength: 200 },
  type: { type: 'string', pattern: CLIENT_TYPE, patternHint: 'lower-case identifier' },
  templateId: { type: 'string' },
  ipWhitelist: { type: 'array', items: { type: 'string' }, max: 100 },
  metadata: freeObject,
  keys: { type: 'array', items: keyUpsertRule, max: 20 },
};
const endpointCreateFields: Record<string, FieldRule> = {
  method: { type: 'string', required: true },
  path: { type: 'string', required: true, pattern: /^\/\S*$/, patternHint: 'must start with /', maxLength: 1000 },
  name: { type: 'string', maxLength: 200 },
  description: { type: 'string', maxLength: 2000 },
  request: freeObject,
  response: freeObject,
  metadata: freeObject,
};
const endpointUpdateFields: Record<string, FieldRule> = {
  name: { type: 'string', maxLength: 200 },
  description: { type: 'string', maxLength: 2000 },
  metadata: freeObject,
};
/** Upper bounds of one seed call: a typo must not exhaust the emulator's memory. */
export const SEED_LIMITS = { templates: 1000, clients: 200_000, keysPerClient: 20, endpoints: 10_000 } as const;
export interface SeedRequest {
  project: string;
  type: string;
  url?: string;
  templates?: number;
  clients?: number;
  keysPerClient?: number;
  endpoints?: number;
  metadata?: Obj;
}
const seedFields: Record<string, FieldRule> = {
  project: {
    type: 'string',
    required: true,
    pattern: SLUG,
    patternHint: 'a project slug: lower-case letters, digits and hyphens, 1-50 characters',
  },
  type: envTypeRule,
  url: urlRule,
  templates: { type: 'integer', min: 1, max: SEED_LIMITS.templates },
  clients: { type: 'integer', min: 0, max: SEED_LIMITS.clients },
  keysPerClient: { type: 'integer', min: 0, max: SEED_LIMITS.keysPerClient },
  endpoints: { type: 'integer', min: 0, max: SEED_LIMITS.endpoints },
  metadata: freeObject,
};
const validationFields: Record<string, FieldRule> = {
  name: { type: 'string' },
  timestamp: { type: 'string' },
  headers: { type: 'object', open: true },
  payload: { type: 'object', open: true },
};

export interface IssuedKey extends Omit<Key, 'hash'> {
  key: string;
}

export interface ValidationOutcome {
  success: boolean;
  clientId: string;
  project_env: string;
  method_path: string;
  durationMs: number;
  reason?: string;
}

/** An answer already written as JSON text (the server sends it as it is). */
export class JsonText {
  readonly text: string;
  /** The text's UTF-8 length, once asked for (a kept page is sent many times). */
  private bytes = -1;
  constructor(text: string) {
    this.text = text;
  }
  get byteLength(): number {
    if (this.bytes < 0) this.bytes = Buffer.byteLength(this.text);
    return this.bytes;
  }
}

/** The whole service state, with every operation of the interface. */
export class KmsService {
  readonly projects = new Map<string, Project>();
  /**
   * Each client's list item as JSON text, made at its first listing; a change to the client
   * (changed()) drops it. Its environment's slug is in it: a client never moves.
   */
  private readonly listed = new WeakMap<Client, string>();
  /** Indexes: project_env → env, env id → env, client id → env. */
  private readonly envsBySlug = new Map<string, Env>();
  private readonly envsById = new Map<string, Env>();
  private readonly clientEnv = new Map<string, Env>();

  // ------------------------------------------------------------------ projects
  listProjects(q: { name?: string | null; status?: string | null; page: number; limit: number }) {
    let items = [...this.projects.values()];
    if (q.name) items = items.filter((p) => p.name.toLowerCase().includes(q.name!.toLowerCase()));
    if (q.status) items = items.filter((p) => p.status === q.status);
    items.sort((a, b) => a.slug.localeCompare(b.slug));
    const page = paginate(items, q.page, q.limit);
    return { ...page, data: page.data.map((p) => this.projectView(p, false)) };
  }

  createProject(body: Json) {
    checkObject(body, projectCreateFields);
    const b = body as { slug: string; name: string; description?: string; envs: Obj[] };
    if (this.projects.has(b.slug)) throw conflict(`project '${b.slug}' already exists`);
    const types = new Set<string>();
    b.envs.forEach((e, i) => {
      if (types.has(e.type as string)) throw badRequest(`body.envs[${i}].type: duplicate environment type '${e.type}'`);
      types.add(e.type as string);
      const names = new Set<string>();
      ((e.templates as Obj[] | undefined) ?? []).forEach((t, j) => {
        if (names.has(t.name as string))
          throw conflict(
            `body.envs[${i}].templates[${j}].name: template '${t.name}' is listed twice for ${b.slug}-${e.type}`,
          );
        names.add(t.name as string);
      });
    });
    const ts = now();
    const project: Project = {
      slug: b.slug,
      name: b.name,
      description: b.description ?? '',
      status: 'active',
      createdAt: ts,
      updatedAt: ts,
      envs: new Map(),
    };
    this.projects.set(project.slug, project);
    for (const e of b.envs) {
      const env = this.addEnv(project, e.type as string, e.url as string);
      for (const t of (e.templates as Obj[] | undefined) ?? []) this.addTemplate(env, t);
    }
    return this.projectView(project, false);
  }

  getProject(ref: string) {
    return this.projectView(this.resolveProject(ref).project, true);
  }

  updateProject(ref: string, body: Json) {
    checkObject(body, projectUpdateFields);
    const b = body as { name?: string; singleEnv?: { url?: string; templates?: Obj[] } };
    let env = this.envsBySlug.get(ref);
    let project: Project;
    if (env) {
      project = this.projects.get(env.project)!;
    } else {
      // PUT creates a missing environment of an existing project (HTTP PUT semantics).
      const owner = [...this.projects.values()].find(
        (p) => ref.startsWith(`${p.slug}-`) && ENV_TYPE.test(ref.slice(p.slug.length + 1)),
      );
      if (!owner) {
        if (this.projects.has(ref)) {
          project = this.projects.get(ref)!;
          if (b.singleEnv)
            throw badRequest(
              `body.singleEnv: '${ref}' is a project slug; address an environment (<slug>-<type>) to change it`,
            );
        } else throw notFound(`environment '${ref}' not found`);
      } else {
        project = owner;
        if (b.singleEnv) {
          if (!b.singleEnv.url) throw badRequest(`body.singleEnv.url: is required to create environment '${ref}'`);
          env = this.addEnv(project, ref.slice(project.slug.length + 1), b.singleEnv.url);
        } else throw notFound(`environment '${ref}' not found`);
      }
    }
    if (env && b.singleEnv?.templates) {
      // Validate every entry before changing anything.
      const seen = new Set<string>();
      b.singleEnv.templates.forEach((t, i) => {
        const existing = this.findTemplateForUpsert(env!, t, `body.singleEnv.templates[${i}]`);
        const key = existing?.id ?? `new:${t.name}`;
        if (seen.has(key)) throw badRequest(`body.singleEnv.templates[${i}]: template listed twice`);
        seen.add(key);
        if (!existing) {
          if (t.name === undefined)
            throw badRequest(`body.singleEnv.templates[${i}].name: is required for a new template`);
          if (t.rateLimitDay === undefined)
            throw badRequest(`body.singleEnv.templates[${i}].rateLimitDay: is required for a new template`);
        } else if (t.name !== undefined && t.name !== existing.name) {
          const clash = [...env!.templates.values()].find((o) => o.name === t.name && o.id !== existing.id);
          if (clash) throw conflict(`template '${t.name}' already exists in ${env!.projectEnv}`);
        }
      });
      const ts = now();
      for (const [i, t] of b.singleEnv.templates.entries()) {
        const existing = this.findTemplateForUpsert(env, t, `body.singleEnv.templates[${i}]`);
        if (!existing) this.addTemplate(env, t);
        else {
          if (t.name !== undefined) existing.name = t.name as string;
          if (t.rateLimitDay !== undefined) existing.rateLimitDay = t.rateLimitDay as number;
          if (t.maxClients !== undefined) existing.maxClients = t.maxClients as number;
          existing.updatedAt = ts;
        }
      }
    }
    if (env && b.singleEnv?.url) env.url = b.singleEnv.url;
    if (b.name !== undefined) project.name = b.name;
    project.updatedAt = now();
    return this.projectView(project, true);
  }

  deleteProject(
    ref: string,
    q: { kind: string | null; envId: string | null; templateId: string | null; force: boolean },
  ) {
    if (!q.kind) throw badRequest(`query parameter 'kind' is required (project, env or template)`);
    const { project, env } = this.resolveProject(ref);
    if (q.kind === 'project') {
      const inUse = [...project.envs.values()].reduce((n, e) => n + e.clients.size, 0);
      if (inUse > 0 && !q.force)
        throw conflict(
          `project '${project.slug}' still has ${inUse} client(s); delete them first or pass forceDelete=true`,
          'RESOURCE_IN_USE',
        );
      for (const e of [...project.envs.values()]) this.dropEnv(e);
      this.projects.delete(project.slug);
      return { success: true, deleted: 'project' };
    }
    if (q.kind === 'env') {
      if (!q.envId) throw badRequest(`query parameter 'envId' is required when kind=env`);
      const target = this.envsById.get(q.envId) ?? this.envsBySlug.get(q.envId);
      if (!target || target.project !== project.slug)
        throw notFound(`environment '${q.envId}' not found in project '${project.slug}'`);
      if (target.clients.size > 0 && !q.force)
        throw conflict(
          `environment '${target.projectEnv}' still has ${target.clients.size} client(s); pass forceDelete=true to delete them too`,
          'RESOURCE_IN_USE',
        );
      this.dropEnv(target);
      project.updatedAt = now();
      return { success: true, deleted: 'env' };
    }
    if (q.kind === 'template') {
      if (!q.templateId) throw badRequest(`query parameter 'templateId' is required when kind=template`);
      const envs = env ? [env] : [...project.envs.values()];
      const owner = envs.find((e) => e.templates.has(q.templateId!));
      if (!owner)
        throw notFound(`template '${q.templateId}' not found in ${env ? env.projectEnv : `project '${project.slug}'`}`);
      const users = [...owner.clients.values()].filter((c) => c.templateId === q.templateId);
      if (users.length > 0 && !q.force)
        throw conflict(
          `template '${owner.templates.get(q.templateId)!.name}' is used by ${users.length} client(s); pass forceDelete=true to delete them too`,
          'RESOURCE_IN_USE',
        );
      for (const c of users) this.dropClient(owner, c);
      owner.templates.delete(q.templateId);
      owner.templateUse?.delete(q.templateId);
      return { success: true, deleted: 'template' };
    }
    throw badRequest(`query parameter 'kind' must be project, env or template, got ${JSON.stringify(q.kind)}`);
  }

  listLogs(
    ref: string,
    q: { methodPath: string | null; clientId: string | null; status: string | null; page: number; limit: number },
  ) {
    const env = this.env(ref);
    if (q.status && q.status !== 'success' && q.status !== 'error')
      throw badRequest(`query parameter 'status' must be success or error, got ${JSON.stringify(q.status)}`);
    let logs = env.logs;
    if (q.methodPath) logs = logs.filter((l) => l.method_path === q.methodPath);
    if (q.clientId) logs = logs.filter((l) => l.clientId === q.clientId);
    if (q.status) logs = logs.filter((l) => l.status === q.status);
    return paginate([...logs].reverse(), q.page, q.limit);
  }

  // ------------------------------------------------------------------ templates
  listTemplates(ref: string | null, page: number, limit: number) {
    const env = this.env(requireEnvParam(ref));
    const page_ = paginate([...env.templates.values()], page, limit);
    const counts = this.templateCounts(env);
    return { ...page_, data: page_.data.map((t) => this.templateView(env, t, counts)) };
  }

  // ------------------------------------------------------------------ clients
  listClients(
    ref: string | null,
    q: { name: string | null; type: string | null; templateId: string | null; page: number; limit: number },
  ) {
    const env = this.env(requireEnvParam(ref));
    const unfiltered = !q.name && !q.type && !q.templateId;
    const pageKey = `${q.page} ${q.limit}`;
    const kept = unfiltered ? env.clientPages?.get(pageKey) : undefined;
    if (kept) return kept;
    env.clientList ??= [...env.clients.values()];
    let items = env.clientList;
    if (q.name) items = items.filter((c) => c.name === q.name);
    if (q.type) items = items.filter((c) => c.type === q.type);
    if (q.templateId) items = items.filter((c) => c.templateId === q.templateId);
    const page = paginate(items, q.page, q.limit);
    // The page written from each client's JSON text, made at its first listing (JSON.stringify of
    // 100 client views a page was ~40% of the emulator's CPU for a plan of 100,000 clients).
    let data = '';
    for (let i = 0; i < page.data.length; i++) {
      const c = page.data[i]!;
      let text = this.listed.get(c);
      if (text === undefined) this.listed.set(c, (text = JSON.stringify(this.clientView(env, c, false))));
      data += i === 0 ? text : `,${text}`;
    }
    const answer = new JsonText(`{"data":[${data}],"pagination":${JSON.stringify(page.pagination)}}`);
    if (unfiltered) {
      (env.clientPages ??= new Map()).set(pageKey, answer);
      // The page holds its clients' texts now: theirs are let go, so the emulator keeps each once.
      for (const c of page.data) this.listed.delete(c);
    }
    return answer;
  }

  createClients(ref: string | null, body: Json) {
    const env = this.env(requireEnvParam(ref));
    const bulk = Array.isArray(body);
    const items = bulk ? (body as Json[]) : [body];
    if (bulk && (items.length === 0 || items.length > MAX_BULK))
      throw badRequest(`body: a bulk create takes 1 to ${MAX_BULK} clients, got ${items.length}`);
    // Validate everything first: bulk creation is all-or-nothing.
    const prepared = items.map((item, i) => {
      const path = bulk ? `body[${i}]` : 'body';
      checkObject(item, clientCreateFields, path);
      const b = item as Obj;
      const template = env.templates.get(b.templateId as string);
      if (!template)
        throw badRequest(`${path}.templateId: template '${b.templateId}' does not exist in ${env.projectEnv}`);
      const ipWhitelist = cidrs((b.ipWhitelist as string[]) ?? [], `${path}.ipWhitelist`);
      const keys = ((b.keys as Obj[]) ?? []).map((k, j) => ({
        name: k.name as string,
        expiresAt: timestampOrNull(k.expiresAt, `${path}.keys[${j}].expiresAt`),
        autoRotate: (k.autoRotate as boolean) ?? false,
      }));
      return { b, template, ipWhitelist, keys };
    });
    this.checkCapacity(
      env,
      prepared.map((p) => p.template),
    );
    const ts = now();
    const created = prepared.map(({ b, template, ipWhitelist, keys }) => {
      const client: Client = {
        id: randomUUID(),
        name: b.name as string,
        type: (b.type as string) ?? 'company',
        templateId: template.id,
        ipWhitelist,
        metadata: (b.metadata as Obj) ?? {},
        keys: [],
        createdAt: ts,
        updatedAt: ts,
        stats: { total: 0, success: 0, error: 0 },
        usage: { day: utcDay(), count: 0 },
      };
      const issued = keys.map((k) => this.issueKey(client, k.name, k.expiresAt, k.autoRotate));
      env.clients.set(client.id, client);
      this.clientEnv.set(client.id, env);
      // A new client is last in the Map's order, so the kept list and counts stay right as they are.
      env.clientList?.push(client);
      env.clientPages = undefined;
      this.countUse(env, template.id, 1);
      return { client, issued };
    });
    const views = created.map(({ client, issued }) => this.clientViewWithSecrets(env, client, issued));
    return bulk ? views : views[0];
  }

  getClient(id: string, ref: string | null) {
    const { env, client } = this.client(id, requireEnvParam(ref));
    return this.clientView(env, client, true);
  }

  updateClient(id: string, ref: string | null, body: Json) {
    const { env, client } = this.client(id, requireEnvParam(ref));
    checkObject(body, clientUpdateFields);
    const b = body as Obj;
    let template: Template | undefined;
    if (b.templateId !== undefined) {
      template = env.templates.get(b.templateId as string);
      if (!template)
        throw badRequest(`body.templateId: template '${b.templateId}' does not exist in ${env.projectEnv}`);
      if (template.id !== client.templateId) this.checkCapacity(env, [template]);
    }
    const ipWhitelist = b.ipWhitelist !== undefined ? cidrs(b.ipWhitelist as string[], 'body.ipWhitelist') : undefined;
    const upserts = ((b.keys as Obj[]) ?? []).map((k, j) => {
      const path = `body.keys[${j}]`;
      const existing = k.id !== undefined ? client.keys.find((x) => x.id === k.id) : undefined;
      if (k.id !== undefined && !existing) throw notFound(`${path}.id: key '${k.id}' not found on client ${client.id}`);
      if (!existing && k.name === undefined) throw badRequest(`${path}.name: is required for a new key`);
      return {
        k,
        existing,
        expiresAt: k.expiresAt === undefined ? undefined : timestampOrNull(k.expiresAt, `${path}.expiresAt`),
      };
    });
    const ts = now();
    if (b.name !== undefined) client.name = b.name as string;
    if (b.type !== undefined) client.type = b.type as string;
    if (template && template.id !== client.templateId) {
      this.countUse(env, client.templateId, -1);
      this.countUse(env, template.id, 1);
      client.templateId = template.id;
    }
    if (ipWhitelist) client.ipWhitelist = ipWhitelist;
    if (b.metadata !== undefined) client.metadata = b.metadata as Obj;
    const issued: IssuedKey[] = [];
    for (const { k, existing, expiresAt } of upserts) {
      if (existing) {
        if (k.name !== undefined) existing.name = k.name as string;
        if (expiresAt !== undefined) existing.expiresAt = expiresAt;
        if (k.autoRotate !== undefined) existing.autoRotate = k.autoRotate as boolean;
      } else {
        issued.push(this.issueKey(client, k.name as string, expiresAt ?? null, (k.autoRotate as boolean) ?? false));
      }
    }
    client.updatedAt = ts;
    this.changed(client);
    return this.clientViewWithSecrets(env, client, issued);
  }

  deleteClient(id: string, ref: string | null, keyId: string | null) {
    const { env, client } = this.client(id, ref);
    if (keyId) {
      const i = client.keys.findIndex((k) => k.id === keyId);
      if (i < 0) throw notFound(`key '${keyId}' not found on client ${client.id}`);
      client.keys.splice(i, 1);
      client.updatedAt = now();
      this.changed(client);
      return { success: true, deleted: 'key', id: keyId };
    }
    this.dropClient(env, client);
    return { success: true, deleted: 'client', id: client.id };
  }

  /** POST /client/{uuid}: validates and logs one use of a customer key. */
  validateUsage(
    id: string,
    ref: string | null,
    methodPath: string | null,
    body: Json,
    started: number,
  ): ValidationOutcome {
    const { env, client } = this.client(id, requireEnvParam(ref));
    if (!methodPath) throw badRequest(`query parameter 'method_path' is required`);
    checkObject(body, validationFields);
    const b = body as { name?: string; timestamp?: string; headers?: Obj; payload?: Obj };
    if (b.timestamp !== undefined) timestampOrNull(b.timestamp, 'body.timestamp');
    const headers = lowerKeys(b.headers ?? {});
    const presented = customerKeyFromHeaders(headers);
    let key: Key | undefined;
    if (presented !== undefined) {
      const h = Buffer.from(hashKey(presented), 'hex');
      key = client.keys.find((k) => timingSafeEqual(Buffer.from(k.hash, 'hex'), h));
      if (key && b.name !== undefined && key.name !== b.name) key = undefined;
    } else if (b.name !== undefined) {
      key = client.keys.find((k) => k.name === b.name);
    }
    let reason: string | undefined;
    if (!key) reason = 'KEY_NOT_FOUND';
    else if (key.expiresAt && Date.parse(key.expiresAt) <= Date.now()) reason = 'KEY_EXPIRED';
    else if (client.ipWhitelist.length > 0) {
      const ip =
        String(headers['x-forwarded-for'] ?? '')
          .split(',')[0]
          ?.trim() ?? '';
      if (!ip || !client.ipWhitelist.some((c) => cidrContains(c, ip))) reason = 'IP_NOT_ALLOWED';
    }
    const template = client.templateId ? env.templates.get(client.templateId) : undefined;
    const day = utcDay();
    if (client.usage.day !== day) client.usage = { day, count: 0 };
    let limited = false;
    if (!reason && template && client.usage.count >= template.rateLimitDay) {
      reason = 'DAILY_LIMIT_EXCEEDED';
      limited = true;
    }
    if (!reason) client.usage.count++;
    const success = reason === undefined;
    const durationMs = Math.max(0, Math.round(performance.now() - started));
    env.logs.push({
      id: randomUUID(),
      clientId: client.id,
      status: success ? 'success' : 'error',
      durationMs,
      timestamp: new Date().toISOString(),
      method_path: methodPath,
      name: key?.name ?? b.name ?? '',
      ...(reason ? { reason } : {}),
    });
    for (const stats of [client.stats, env.endpoints.get(methodPath)?.stats]) {
      if (!stats) continue;
      stats.total++;
      if (success) stats.success++;
      else stats.error++;
    }
    if (limited) {
      const midnight = new Date(`${day}T00:00:00Z`).getTime() + 86_400_000;
      throw new ApiError(
        429,
        'DAILY_LIMIT_EXCEEDED',
        `client ${client.id} reached the daily limit of ${template!.rateLimitDay} calls of template '${template!.name}'`,
        { 'retry-after': String(Math.max(1, Math.ceil((midnight - Date.now()) / 1000))) },
      );
    }
    return {
      success,
      clientId: client.id,
      project_env: env.projectEnv,
      method_path: methodPath,
      durationMs,
      ...(reason ? { reason } : {}),
    };
  }

  // ------------------------------------------------------------------ endpoints
  listEndpoints(ref: string | null, page: number, limit: number) {
    const env = this.env(requireEnvParam(ref));
    const p = paginate([...env.endpoints.values()], page, limit);
    return { ...p, data: p.data.map((e) => endpointView(env, e)) };
  }

  createEndpoints(ref: string | null, body: Json) {
    const env = this.env(requireEnvParam(ref));
    const bulk = Array.isArray(body);
    const items = bulk ? (body as Json[]) : [body];
    if (bulk && (items.length === 0 || items.length > MAX_BULK))
      throw badRequest(`body: a bulk create takes 1 to ${MAX_BULK} endpoints, got ${items.length}`);
    const seen = new Set<string>();
    const prepared = items.map((item, i) => {
      const path = bulk ? `body[${i}]` : 'body';
      checkObject(item, endpointCreateFields, path);
      const b = item as Obj;
      const method = (b.method as string).toUpperCase();
      if (!METHODS.includes(method))
        throw badRequest(`${path}.method: must be one of ${METHODS.join(', ')}, got ${JSON.stringify(b.method)}`);
      const mp = `${method}:${b.path as string}`;
      if (env.endpoints.has(mp) || seen.has(mp)) throw conflict(`endpoint '${mp}' already exists in ${env.projectEnv}`);
      seen.add(mp);
      return { b, method, mp };
    });
    const ts = now();
    const created = prepared.map(({ b, method, mp }) => {
      const e: Endpoint = {
        method,
        path: b.path as string,
        name: (b.name as string) ?? mp,
        description: (b.description as string) ?? '',
        request: (b.request as Obj) ?? {},
        response: (b.response as Obj) ?? {},
        metadata: (b.metadata as Obj) ?? {},
        stats: { total: 0, success: 0, error: 0 },
        createdAt: ts,
        updatedAt: ts,
      };
      env.endpoints.set(mp, e);
      return endpointView(env, e);
    });
    return bulk ? created : created[0];
  }

  getEndpoint(mp: string, ref: string | null) {
    const env = this.env(requireEnvParam(ref));
    return endpointView(env, this.endpoint(env, mp));
  }

  updateEndpoint(mp: string, ref: string | null, body: Json) {
    const env = this.env(requireEnvParam(ref));
    const e = this.endpoint(env, mp);
    checkObject(body, endpointUpdateFields);
    const b = body as Obj;
    if (b.name !== undefined) e.name = b.name as string;
    if (b.description !== undefined) e.description = b.description as string;
    if (b.metadata !== undefined) e.metadata = b.metadata as Obj;
    e.updatedAt = now();
    return endpointView(env, e);
  }

  deleteEndpoint(mp: string, ref: string | null) {
    const env = this.env(requireEnvParam(ref));
    const e = this.endpoint(env, mp);
    env.endpoints.delete(`${e.method}:${e.path}`);
    return { success: true, method_path: `${e.method}:${e.path}`, project_env: env.projectEnv };
  }

  // ------------------------------------------------------------------ helpers
  /** Environment by project_env, 404 when unknown. */
  env(ref: string): Env {
    const env = this.envsBySlug.get(ref);
    if (!env) throw notFound(`environment '${ref}' not found`);
    return env;
  }

  private resolveProject(ref: string): { project: Project; env?: Env } {
    const env = this.envsBySlug.get(ref);
    if (env) return { project: this.projects.get(env.project)!, env };
    const project = this.projects.get(ref);
    if (project) return { project };
    throw notFound(`environment '${ref}' not found`);
  }

  private client(id: string, ref: string | null): { env: Env; client: Client } {
    const env = this.clientEnv.get(id);
    const client = env?.clients.get(id);
    if (!env || !client || (ref && ref !== env.projectEnv)) {
      if (ref && !this.envsBySlug.has(ref)) throw notFound(`environment '${ref}' not found`);
      throw notFound(`client '${id}' not found${ref ? ` in ${ref}` : ''}`);
    }
    return { env, client };
  }

  private endpoint(env: Env, mp: string): Endpoint {
    const i = mp.indexOf(':');
    const key = i > 0 ? `${mp.slice(0, i).toUpperCase()}:${mp.slice(i + 1)}` : mp;
    const e = env.endpoints.get(key);
    if (!e) throw notFound(`endpoint '${mp}' not found in ${env.projectEnv}`);
    return e;
  }

  private findTemplateForUpsert(env: Env, t: Obj, path: string): Template | undefined {
    if (t.id !== undefined) {
      const byId = env.templates.get(t.id as string);
      if (!byId) throw notFound(`${path}.id: template '${t.id}' not found in ${env.projectEnv}`);
      return byId;
    }
    return [...env.templates.values()].find((x) => x.name === t.name);
  }

  private addEnv(project: Project, type: string, url: string): Env {
    const env: Env = {
      id: randomUUID(),
      project: project.slug,
      projectEnv: `${project.slug}-${type}`,
      type,
      url,
      createdAt: now(),
      templates: new Map(),
      clients: new Map(),
      endpoints: new Map(),
      logs: [],
    };
    if (this.envsBySlug.has(env.projectEnv)) throw conflict(`environment '${env.projectEnv}' already exists`);
    project.envs.set(env.projectEnv, env);
    this.envsBySlug.set(env.projectEnv, env);
    this.envsById.set(env.id, env);
    return env;
  }

  private addTemplate(env: Env, t: Obj): Template {
    if ([...env.templates.values()].some((x) => x.name === t.name))
      throw conflict(`template '${t.name}' already exists in ${env.projectEnv}`);
    const ts = now();
    const template: Template = {
      id: randomUUID(),
      name: t.name as string,
      rateLimitDay: t.rateLimitDay as number,
      maxClients: (t.maxClients as number | undefined) ?? DEFAULT_MAX_CLIENTS,
      createdAt: ts,
      updatedAt: ts,
    };
    env.templates.set(template.id, template);
    return template;
  }

  /** Called after any change to a client's listed fields or keys: its list item is written again. */
  private changed(client: Client) {
    this.listed.delete(client);
    const env = this.clientEnv.get(client.id);
    if (env) env.clientPages = undefined;
  }

  private dropEnv(env: Env) {
    for (const id of env.clients.keys()) this.clientEnv.delete(id);
    this.projects.get(env.project)?.envs.delete(env.projectEnv);
    this.envsBySlug.delete(env.projectEnv);
    this.envsById.delete(env.id);
  }

  private dropClient(env: Env, client: Client) {
    env.clients.delete(client.id);
    this.clientEnv.delete(client.id);
    env.clientList = undefined;
    env.clientPages = undefined;
    this.countUse(env, client.templateId, -1);
  }

  /** Keeps the environment's clients-per-template counts (if counted yet) in step with a change. */
  private countUse(env: Env, templateId: string | null, delta: number) {
    if (env.templateUse === undefined || templateId === null) return;
    env.templateUse.set(templateId, (env.templateUse.get(templateId) ?? 0) + delta);
  }

  private envMax(env: Env): number {
    let max = 0;
    for (const t of env.templates.values()) max += t.maxClients;
    return max;
  }

  /** Refuses creates that would exceed a template's maxClients or the environment's clients.max. */
  private checkCapacity(env: Env, templates: Template[]) {
    const perTemplate = new Map<string, number>();
    for (const t of templates) perTemplate.set(t.id, (perTemplate.get(t.id) ?? 0) + 1);
    const use = this.templateCounts(env);
    for (const [id, adding] of perTemplate) {
      const t = env.templates.get(id)!;
      const used = use.get(id) ?? 0;
      if (used + adding > t.maxClients)
        throw conflict(
          `template '${t.name}' allows ${t.maxClients} client(s); ${used} exist and ${adding} more were requested`,
          'CLIENT_LIMIT_REACHED',
        );
    }
    const max = this.envMax(env);
    if (env.clients.size + templates.length > max)
      throw conflict(
        `environment '${env.projectEnv}' allows ${max} client(s); ${env.clients.size} exist and ${templates.length} more were requested`,
        'CLIENT_LIMIT_REACHED',
      );
  }

  private issueKey(client: Client, name: string, expiresAt: string | null, autoRotate: boolean): IssuedKey {
    const raw = CUSTOMER_KEY_PREFIX + randomBytes(32).toString('base64url');
    const key: Key = {
      id: randomUUID(),
      name,
      expiresAt,
      autoRotate,
      hash: hashKey(raw),
      keyPrefix: raw.slice(0, 12),
      createdAt: now(),
    };
    client.keys.push(key);
    this.changed(client);
    const { hash: _hash, ...view } = key;
    return { ...view, key: raw };
  }

  /**
   * Bulk-loads an environment without HTTP (benchmarks, large fixtures). Names are deterministic
   * (`tpl-000`, `client-00000`, `key-0`, `GET:/r/0000`) so a generated config can match them.
   */
  seed(input: unknown) {
    // Checked whole before anything changes: a bad seed is refused, nothing is applied.
    checkObject(input, seedFields);
    const req = input as SeedRequest;
    checkDepth(req.metadata, 'body.metadata');
    let project = this.projects.get(req.project);
    if (!project) {
      const ts = now();
      project = {
        slug: req.project,
        name: req.project,
        description: '',
        status: 'active',
        createdAt: ts,
        updatedAt: ts,
        envs: new Map(),
      };
      this.projects.set(project.slug, project);
    }
    const env =
      this.envsBySlug.get(`${req.project}-${req.type}`) ??
      this.addEnv(project, req.type, req.url ?? 'https://api.example.test');
    const nTemplates = Math.max(1, req.templates ?? 1);
    const nClients = req.clients ?? 0;
    const templates: Template[] = [];
    for (let i = 0; i < nTemplates; i++) {
      const name = `tpl-${String(i).padStart(3, '0')}`;
      const existing = [...env.templates.values()].find((t) => t.name === name);
      templates.push(
        existing ??
          this.addTemplate(env, { name, rateLimitDay: 1000 + i, maxClients: Math.ceil(nClients / nTemplates) + 10 }),
      );
    }
    const ts = now();
    for (let i = 0; i < nClients; i++) {
      const client: Client = {
        id: randomUUID(),
        name: `client-${String(i).padStart(5, '0')}`,
        type: 'company',
        templateId: templates[i % nTemplates]!.id,
        ipWhitelist: ['10.0.0.0/8'],
        metadata: { ...(req.metadata ?? {}), index: String(i) },
        keys: [],
        createdAt: ts,
        updatedAt: ts,
        stats: { total: 0, success: 0, error: 0 },
        usage: { day: utcDay(), count: 0 },
      };
      for (let k = 0; k < (req.keysPerClient ?? 0); k++) this.issueKey(client, `key-${k}`, null, false);
      env.clients.set(client.id, client);
      this.clientEnv.set(client.id, env);
    }
    env.clientList = undefined;
    env.clientPages = undefined;
    env.templateUse = undefined;
    for (let i = 0; i < (req.endpoints ?? 0); i++) {
      const path = `/r/${String(i).padStart(4, '0')}`;
      env.endpoints.set(`GET:${path}`, {
        method: 'GET',
        path,
        name: `route ${i}`,
        description: '',
        request: {},
        response: {},
        metadata: { ...(req.metadata ?? {}) },
        stats: { total: 0, success: 0, error: 0 },
        createdAt: ts,
        updatedAt: ts,
      });
    }
    return {
      project_env: env.projectEnv,
      templates: templates.length,
      clients: env.clients.size,
      endpoints: env.endpoints.size,
    };
  }

  // ------------------------------------------------------------------ views
  private projectView(p: Project, full: boolean) {
    const list = [...p.envs.values()].map((e) => {
      const summary = {
        id: e.id,
        project_env: e.projectEnv,
        type: e.type,
        clients: { count: e.clients.size, max: this.envMax(e) },
      };
      if (!full) return summary;
      const counts = this.templateCounts(e);
      return {
        ...summary,
        url: e.url,
        createdAt: e.createdAt,
        templates: [...e.templates.values()].map((t) => this.templateView(e, t, counts)),
        endpoints: { count: e.endpoints.size },
      };
    });
    return {
      slug: p.slug,
      name: p.name,
      description: p.description,
      status: p.status,
      createdAt: p.createdAt,
      updatedAt: p.updatedAt,
      envs: { count: list.length, list },
    };
  }

  /**
   * Clients per template id: counted in one pass over the environment's clients at first use, then
   * kept by countUse (a create's capacity check was a pass over the whole environment each).
   */
  private templateCounts(env: Env): ReadonlyMap<string, number> {
    if (env.templateUse) return env.templateUse;
    const counts = new Map<string, number>();
    for (const c of env.clients.values()) {
      if (c.templateId !== null) counts.set(c.templateId, (counts.get(c.templateId) ?? 0) + 1);
    }
    env.templateUse = counts;
    return counts;
  }

  private templateView(env: Env, t: Template, counts: ReadonlyMap<string, number>) {
    const count = counts.get(t.id) ?? 0;
    return {
      id: t.id,
      name: t.name,
      rateLimitDay: t.rateLimitDay,
      maxClients: t.maxClients,
      project_env: env.projectEnv,
      clients: { count },
      createdAt: t.createdAt,
      updatedAt: t.updatedAt,
    };
  }

  private clientView(env: Env, c: Client, withStats: boolean) {
    const view = {
      id: c.id,
      client_uuid: c.id,
      name: c.name,
      type: c.type,
      templateId: c.templateId,
      ipWhitelist: c.ipWhitelist,
      metadata: c.metadata,
      project_env: env.projectEnv,
      keys: c.keys.map(keyView),
      createdAt: c.createdAt,
      updatedAt: c.updatedAt,
    };
    if (!withStats) return view;
    const today = c.usage.day === utcDay() ? c.usage.count : 0;
    return { ...view, stats: { ...c.stats, today } };
  }

  private clientViewWithSecrets(env: Env, c: Client, issued: IssuedKey[]) {
    const view = this.clientView(env, c, false);
    const raw = new Map(issued.map((k) => [k.id, k.key]));
    return { ...view, keys: view.keys.map((k) => (raw.has(k.id) ? { ...k, key: raw.get(k.id)! } : k)) };
  }

  // ------------------------------------------------------------------ persistence
  toJSON() {
    return {
      projects: [...this.projects.values()].map((p) => ({
        ...p,
        envs: [...p.envs.values()].map((e) => ({
          ...e,
          clientList: undefined,
          clientPages: undefined,
          templateUse: undefined,
          templates: [...e.templates.values()],
          clients: [...e.clients.values()],
          endpoints: [...e.endpoints.values()],
        })),
      })),
    };
  }

  static fromJSON(data: { projects?: unknown[] }): KmsService {
    const svc = new KmsService();
    for (const raw of (data.projects ?? []) as Obj[]) {
      const project: Project = { ...(raw as unknown as Project), envs: new Map() };
      svc.projects.set(project.slug, project);
      for (const re of raw.envs as Obj[]) {
        const env: Env = {
          ...(re as unknown as Env),
          templates: new Map((re.templates as Template[]).map((t) => [t.id, t])),
          clients: new Map((re.clients as Client[]).map((c) => [c.id, c])),
          endpoints: new Map((re.endpoints as Endpoint[]).map((e) => [`${e.method}:${e.path}`, e])),
          logs: (re.logs as LogEntry[]) ?? [],
        };
        project.envs.set(env.projectEnv, env);
        svc.envsBySlug.set(env.projectEnv, env);
        svc.envsById.set(env.id, env);
        for (const id of env.clients.keys()) svc.clientEnv.set(id, env);
      }
    }
    return svc;
  }
}

function keyView(k: Key) {
  return {
    id: k.id,
    name: k.name,
    expiresAt: k.expiresAt,
    autoRotate: k.autoRotate,
    keyPrefix: k.keyPrefix,
    createdAt: k.createdAt,
  };
}

function endpointView(env: Env, e: Endpoint) {
  return {
    method: e.method,
    path: e.path,
    name: e.name,
    description: e.description,
    request: e.request,
    response: e.response,
    metadata: e.metadata,
    method_path: `${e.method}:${e.path}`,
    project_env: env.projectEnv,
    stats: { ...e.stats },
    createdAt: e.createdAt,
    updatedAt: e.updatedAt,
  };
}

function requireEnvParam(ref: string | null): string {
  if (!ref) throw badRequest(`query parameter 'project_env' is required`);
  return ref;
}

function lowerKeys(o: Obj): Record<string, unknown> {
  // No prototype: a header named `__proto__` is a plain key, not a prototype swap.
  const out: Record<string, unknown> = Object.create(null);
  for (const [k, v] of Object.entries(o)) out[k.toLowerCase()] = v;
  return out;
}

function customerKeyFromHeaders(h: Record<string, unknown>): string | undefined {
  const direct = h['x-api-key'];
  if (typeof direct === 'string' && direct) return direct;
  const auth = h.authorization;
  if (typeof auth === 'string') {
    const m = /^Bearer\s+(\S+)$/i.exec(auth);
    if (m?.[1]) return m[1];
  }
  return undefined;
}
