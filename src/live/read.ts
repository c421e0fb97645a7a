// Reads the live state of the environments in scope, and nothing else (DESIGN.md "Ownership").
// Cost: one project list, one project get per project in scope, then per environment the paged
// lists of templates (when the project view lacks them), clients and endpoints, all in parallel.
import { createHash } from 'node:crypto';
import { clientId, type KmsClient, type WireClient, type WireEndpoint, type WireEnv, type WireProject, type WireTemplate } from '../api/client.js';
import {
  address, canonicalCidrSet, canonicalJson, canonicalTimestamp, emptyLiveState, type JsonObject, type LiveClient,
  type LiveEndpoint, type LiveEnv, type LiveKey, type LiveState, type LiveTemplate, NormalizeError,
} from '../model/index.js';

export interface LiveScope {
  /** Project slugs the desired state names. */
  projects: string[];
  /** Environment slugs (`project_env`) in scope. */
  envs: string[];
}

export interface DuplicateLive {
  address: string;
  ids: string[];
}

export interface LiveReadResult {
  state: LiveState;
  /** Two live resources with one identity: reported, never guessed at. */
  duplicates: DuplicateLive[];
  /** Address → hash of what was read; a saved plan compares these before applying. */
  fingerprints: Record<string, string>;
}

const asObject = (v: unknown): JsonObject => (v && typeof v === 'object' && !Array.isArray(v) ? (v as JsonObject) : {});

function timestamp(v: string | null | undefined): string | null {
  if (!v) return null;
  try {
    return canonicalTimestamp(v);
  } catch (e) {
    if (e instanceof NormalizeError) return v;
    throw e;
  }
}

function cidrs(list: string[] | undefined): string[] {
  try {
    return canonicalCidrSet(list ?? []);
  } catch {
    return [...(list ?? [])].sort();
  }
}

export function fingerprint(value: unknown): string {
  return createHash('sha256').update(canonicalJson(value as never)).digest('base64url').slice(0, 22);
}

function toTemplate(projectEnv: string, t: WireTemplate): LiveTemplate {
  return { id: t.id, projectEnv, name: t.name, rateLimitDay: t.rateLimitDay ?? 0, ...(t.maxClients !== undefined ? { maxClients: t.maxClients } : {}) };
}

function toClient(projectEnv: string, c: WireClient, templateNames: Map<string, string>): LiveClient {
  const keys: LiveKey[] = (c.keys ?? []).map((k) => ({
    id: k.id, name: k.name, expiresAt: timestamp(k.expiresAt), autoRotate: k.autoRotate ?? false,
    ...(k.createdAt ? { createdAt: k.createdAt } : {}),
  }));
  const templateName = c.templateId ? templateNames.get(c.templateId) : undefined;
  return {
    id: clientId(c), projectEnv, name: c.name, type: c.type, templateId: c.templateId ?? null,
    ...(templateName !== undefined ? { templateName } : {}),
    ipWhitelist: cidrs(c.ipWhitelist), metadata: asObject(c.metadata), keys,
  };
}

function toEndpoint(projectEnv: string, e: WireEndpoint): LiveEndpoint {
  return {
    projectEnv, method: e.method.toUpperCase(), path: e.path, name: e.name ?? '', description: e.description ?? '',
    request: asObject(e.request), response: asObject(e.response), metadata: asObject(e.metadata),
  };
}

/** A list item can be used as is only when it carries every field the diff compares. */
function clientComplete(c: WireClient): boolean {
  return Array.isArray(c.keys) && c.metadata !== undefined && Array.isArray(c.ipWhitelist) && c.templateId !== undefined;
}

export async function readLiveState(api: KmsClient, scope: LiveScope): Promise<LiveReadResult> {
  const state = emptyLiveState();
  const inScope = new Set(scope.envs);
  const projectsWanted = new Set([...scope.projects, ...scope.envs.map((e) => e.replace(/-[a-z][a-z0-9]*$/, ''))]);
  const summaries = await api.listProjects();
  const owners = summaries.filter(
    (p) => projectsWanted.has(p.slug) || (p.envs?.list ?? []).some((e) => inScope.has(e.project_env)),
  );
  const fulls = await Promise.all(owners.map(async (p) => {
    const first = p.envs?.list?.[0]?.project_env;
    return first ? { summary: p, full: await api.getProject(first) } : { summary: p, full: p };
  }));

  const envReads: Promise<void>[] = [];
  for (const { summary, full } of fulls) {
    state.projects.push({ slug: summary.slug, name: full.name ?? summary.name ?? '', ...(full.description !== undefined ? { description: full.description } : {}) });
    const envList: WireEnv[] = full.envs?.list ?? summary.envs?.list ?? [];
    for (const e of envList) {
      if (!inScope.has(e.project_env)) continue;
      const env: LiveEnv = {
        id: e.id ?? e.project_env, project: summary.slug, projectEnv: e.project_env,
        type: e.type ?? e.project_env.slice(summary.slug.length + 1), ...(e.url !== undefined ? { url: e.url } : {}),
      };
      state.envs.push(env);
      envReads.push(readEnv(api, env, e.templates, state));
    }
  }
  await Promise.all(envReads);
  sortLive(state);
  return { state, duplicates: findDuplicates(state), fingerprints: fingerprints(state) };
}

async function readEnv(api: KmsClient, env: LiveEnv, embedded: WireTemplate[] | undefined, state: LiveState) {
  const pe = env.projectEnv;
  const [templates, clients, endpoints] = await Promise.all([
    embedded && embedded.every((t) => t.id && t.rateLimitDay !== undefined) ? embedded : api.listTemplates(pe),
    api.listClients(pe),
    api.listEndpoints(pe),
  ]);
  const names = new Map<string, string>();
  for (const t of templates) {
    state.templates.push(toTemplate(pe, t));
    names.set(t.id, t.name);
  }
  const completed = await Promise.all(clients.map((c) => (clientComplete(c) ? c : api.getClient(clientId(c), pe))));
  for (const c of completed) state.clients.push(toClient(pe, c, names));
  for (const e of endpoints) state.endpoints.push(toEndpoint(pe, e));
}

function sortLive(s: LiveState) {
  const by = <T>(key: (x: T) => string) => (a: T, b: T) => (key(a) < key(b) ? -1 : key(a) > key(b) ? 1 : 0);
  s.projects.sort(by((p) => p.slug));
  s.envs.sort(by((e) => e.projectEnv));
  s.templates.sort(by((t) => `${t.projectEnv}\u0000${t.name}\u0000${t.id}`));
  s.clients.sort(by((c) => `${c.projectEnv}\u0000${c.name}\u0000${c.id}`));
  for (const c of s.clients) c.keys.sort(by((k) => `${k.name}\u0000${k.createdAt ?? ''}\u0000${k.id}`));
  s.endpoints.sort(by((e) => `${e.projectEnv}\u0000${e.method}:${e.path}`));
}

function findDuplicates(s: LiveState): DuplicateLive[] {
  const seen = new Map<string, string[]>();
  const note = (addr: string, id: string) => seen.set(addr, [...(seen.get(addr) ?? []), id]);
  for (const t of s.templates) note(address.template(t.projectEnv, t.name), t.id);
  // Keys sharing a name are rotation generations, not duplicates (plan/key-health.ts).
  for (const c of s.clients) note(address.client(c.projectEnv, c.name), c.id);
  return [...seen].filter(([, ids]) => ids.length > 1).map(([addr, ids]) => ({ address: addr, ids }));
}

function fingerprints(s: LiveState): Record<string, string> {
  const out: Record<string, string> = {};
  for (const p of s.projects) out[address.project(p.slug)] = fingerprint(p);
  for (const e of s.envs) out[address.env(e.projectEnv)] = fingerprint(e);
  for (const t of s.templates) out[`${address.template(t.projectEnv, t.name)}#${t.id}`] = fingerprint(t);
  for (const c of s.clients) out[`${address.client(c.projectEnv, c.name)}#${c.id}`] = fingerprint(c);
  for (const e of s.endpoints) out[address.endpoint(e.projectEnv, e.method, e.path)] = fingerprint(e);
  return out;
}

export type { WireProject };
