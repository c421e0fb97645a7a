// Reads the live state of the environments in scope, and nothing else (DESIGN.md "Ownership").
// Cost: one project list, then one project get per project in scope and, beside it, per
// environment the paged lists of clients and endpoints (and of templates when the project view
// lacks them), all in parallel.
import { hash } from 'node:crypto';
import {
  clientId,
  type KmsClient,
  type WireClient,
  type WireEndpoint,
  type WireEnv,
  type WireKey,
  type WireProject,
  type WireTemplate,
} from '../api/client.js';
import {
  address,
  canonicalCidrSet,
  canonicalJson,
  canonicalTimestamp,
  emptyLiveState,
  INVENTORY_RECORD_PREFIX,
  type JsonObject,
  type LiveClient,
  type LiveEndpoint,
  type LiveEnv,
  type LiveKey,
  type LiveRecord,
  type LiveState,
  type LiveTemplate,
  NormalizeError,
  sortInPlace,
} from '../model/index.js';

export interface LiveScope {
  /** Project slugs the desired state names. */
  projects: string[];
  /** Environment slugs (`project_env`) in scope. */
  envs: string[];
  /**
   * Other environments of the projects in `projects` that are read too: environments that left
   * the configuration, which the plan removes or keeps by ownership. Never asked for the other
   * environments of a project the configuration only references (`external`): those are not its
   * own, and cannot leave it.
   */
  alsoRead?: (projectEnv: string) => boolean;
}

export interface DuplicateLive {
  address: string;
  ids: string[];
}

export interface LiveReadResult {
  state: LiveState;
  /** Two live resources with one identity: reported, never guessed at. */
  duplicates: DuplicateLive[];
  /** Address → hash of what was read; a saved plan compares these before applying (empty when not asked for). */
  fingerprints: Record<string, string>;
  /** Every live environment (`project_env`) of each project read, in scope or not (export: is a project exported whole?). */
  projectEnvs?: Record<string, string[]>;
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

/**
 * `cidrs` remembered per distinct list: thousands of clients usually share a handful of
 * whitelists, and canonicalising a CIDR (BigInt arithmetic) costs more than the lookup.
 * A list of one string (the usual whitelist) is looked up by that string, without the JSON text
 * of the list as its key (1,000,000 clients: ~310 → ~110-170 ms). The clients of one list share
 * its array, frozen (LiveClient's is readonly; a write would throw, not change other clients):
 * a copy per client was 56 bytes of each live client's ~550 that every young-generation
 * collection copied on their way to the old space.
 */
const NO_CIDRS: readonly string[] = Object.freeze([]);

function cidrMemo(): (list: string[] | undefined) => readonly string[] {
  const memo = new Map<string, readonly string[]>();
  const single = new Map<string, readonly string[]>();
  return (list) => {
    if (!list || list.length === 0) return NO_CIDRS;
    const one = list.length === 1 && typeof list[0] === 'string' ? list[0] : undefined;
    const key = one ?? JSON.stringify(list);
    const known = one !== undefined ? single : memo;
    let out = known.get(key);
    if (!out) {
      out = Object.freeze(cidrs(list));
      known.set(key, out);
    }
    return out;
  };
}

/** sha256 of the canonical JSON (base64url, 22 characters); the one-shot `hash` spares a Hash object per resource. */
export function fingerprint(value: unknown): string {
  return hash('sha256', canonicalJson(value as never), 'base64url').slice(0, 22);
}

const sameKeys = (o: object, expected: readonly string[]) => {
  const keys = Object.keys(o);
  if (keys.length !== expected.length) return false;
  for (let i = 0; i < keys.length; i++) if (keys[i] !== expected[i]) return false;
  return true;
};
// Own keys of the objects `toClient` builds, in the order it builds them.
const CLIENT_KEYS = ['id', 'projectEnv', 'name', 'type', 'templateId', 'ipWhitelist', 'metadata', 'keys'];
const CLIENT_KEYS_NAMED = [
  'id',
  'projectEnv',
  'name',
  'type',
  'templateId',
  'templateName',
  'ipWhitelist',
  'metadata',
  'keys',
];
const KEY_KEYS = ['id', 'name', 'expiresAt', 'autoRotate'];
const KEY_KEYS_CREATED = ['id', 'name', 'expiresAt', 'autoRotate', 'createdAt'];

/**
 * `canonicalJson(c)` of a client exactly as `toClient` builds it, written field by field in
 * sorted-key order instead of through a key-sorted deep copy: a plan of 100,000 clients
 * fingerprints every one of them. Anything of another shape returns undefined (the generic path).
 */
function clientCanonicalJson(c: LiveClient): string | undefined {
  const str = (v: unknown) => typeof v === 'string';
  if (!sameKeys(c, c.templateName === undefined ? CLIENT_KEYS : CLIENT_KEYS_NAMED)) return undefined;
  if (!str(c.id) || !str(c.projectEnv) || !str(c.name) || !(c.type === undefined || str(c.type))) return undefined;
  if (!(c.templateId === null || str(c.templateId)) || !(c.templateName === undefined || str(c.templateName)))
    return undefined;
  if (!Array.isArray(c.ipWhitelist) || !c.ipWhitelist.every(str) || !Array.isArray(c.keys)) return undefined;
  const q = JSON.stringify;
  let keys = '';
  for (const k of c.keys) {
    if (!sameKeys(k, k.createdAt === undefined ? KEY_KEYS : KEY_KEYS_CREATED) || !str(k.id) || !str(k.name))
      return undefined;
    if (
      !(k.expiresAt === null || str(k.expiresAt)) ||
      typeof k.autoRotate !== 'boolean' ||
      !(k.createdAt === undefined || str(k.createdAt))
    )
      return undefined;
    keys += `${keys ? ',' : ''}{"autoRotate":${k.autoRotate}${k.createdAt !== undefined ? `,"createdAt":${q(k.createdAt)}` : ''},"expiresAt":${k.expiresAt === null ? 'null' : q(k.expiresAt)},"id":${q(k.id)},"name":${q(k.name)}}`;
  }
  return (
    `{"id":${q(c.id)},"ipWhitelist":${q(c.ipWhitelist)},"keys":[${keys}],"metadata":${canonicalJson(c.metadata)},"name":${q(c.name)},` +
    `"projectEnv":${q(c.projectEnv)},"templateId":${q(c.templateId)}${c.templateName !== undefined ? `,"templateName":${q(c.templateName)}` : ''}` +
    `${c.type !== undefined ? `,"type":${q(c.type)}` : ''}}`
  );
}

/** `fingerprint(c)` of a client, by the fast path when it applies. */
export function clientFingerprint(c: LiveClient): string {
  const text = clientCanonicalJson(c);
  return text === undefined ? fingerprint(c) : hash('sha256', text, 'base64url').slice(0, 22);
}

function toTemplate(projectEnv: string, t: WireTemplate): LiveTemplate {
  return {
    id: t.id,
    projectEnv,
    name: t.name,
    rateLimitDay: t.rateLimitDay ?? 0,
    ...(t.maxClients !== undefined ? { maxClients: t.maxClients } : {}),
  };
}

/**
 * A key as the model holds it, each shape made by one literal: a field added afterwards would go
 * to a property store of its own (an object more per client of a 100,000-client read).
 */
function toKey(k: WireKey): LiveKey {
  const expiresAt = timestamp(k.expiresAt);
  const autoRotate = k.autoRotate ?? false;
  return k.createdAt
    ? { id: k.id, name: k.name, expiresAt, autoRotate, createdAt: k.createdAt }
    : { id: k.id, name: k.name, expiresAt, autoRotate };
}

function toClient(
  projectEnv: string,
  c: WireClient,
  templates: Map<string, { id: string; name: string }>,
  cidrs: (list: string[] | undefined) => readonly string[],
): LiveClient {
  // Written out (no conditional spreads): this runs once per client, 100,000 times in a big plan.
  // Indexed loops in this file's per-client code: it runs mostly before V8 optimizes it, and
  // there a for-of allocates an iterator result per item.
  // A client's usual one key in an array of one: an array grown by push has room for 17.
  const wireKeys = c.keys ?? [];
  let keys: LiveKey[];
  if (wireKeys.length === 1) keys = [toKey(wireKeys[0]!)];
  else {
    keys = [];
    for (let i = 0; i < wireKeys.length; i++) keys.push(toKey(wireKeys[i]!));
  }
  const template = c.templateId ? templates.get(c.templateId) : undefined;
  const templateName = template?.name;
  const id = clientId(c);
  // The template's own id string, not the page's copy of it (36 characters a client, kept in the model).
  const templateId = template ? template.id : (c.templateId ?? null);
  const ipWhitelist = cidrs(c.ipWhitelist);
  const metadata = asObject(c.metadata);
  return templateName !== undefined
    ? { id, projectEnv, name: c.name, type: c.type, templateId, templateName, ipWhitelist, metadata, keys }
    : { id, projectEnv, name: c.name, type: c.type, templateId, ipWhitelist, metadata, keys };
}

function toEndpoint(projectEnv: string, e: WireEndpoint): LiveEndpoint {
  return {
    projectEnv,
    method: e.method.toUpperCase(),
    path: e.path,
    name: e.name ?? '',
    description: e.description ?? '',
    request: asObject(e.request),
    response: asObject(e.response),
    metadata: asObject(e.metadata),
  };
}

/** A list item can be used as is only when it carries every field the diff compares. */
function clientComplete(c: WireClient): boolean {
  return (
    Array.isArray(c.keys) && c.metadata !== undefined && Array.isArray(c.ipWhitelist) && c.templateId !== undefined
  );
}

export interface ReadOptions {
  /**
   * Hash every object read (default true). Only saved plans use the hashes, and at 100,000
   * clients they are a quarter of the reader's CPU, so a plain plan or apply leaves them out.
   */
  fingerprints?: boolean;
}

export async function readLiveState(api: KmsClient, scope: LiveScope, opts: ReadOptions = {}): Promise<LiveReadResult> {
  const state = emptyLiveState();
  const inScope = new Set(scope.envs);
  const defined = new Set(scope.projects);
  const wanted = (pe: string, project: string) =>
    inScope.has(pe) || (defined.has(project) && scope.alsoRead?.(pe) === true);
  const projectsWanted = new Set([...scope.projects, ...scope.envs.map((e) => e.replace(/-[a-z][a-z0-9]*$/, ''))]);
  const projectEnvs: Record<string, string[]> = {};
  const summaries = await api.listProjects();
  const owners = summaries.filter(
    (p) => projectsWanted.has(p.slug) || (p.envs?.list ?? []).some((e) => inScope.has(e.project_env)),
  );
  // The client and endpoint lists of the environments the project list shows start now, beside
  // the project reads (one round trip sooner): they need only the environment's slug.
  const lists = new Map<string, EnvLists>();
  for (const p of owners)
    for (const e of p.envs?.list ?? [])
      if (wanted(e.project_env, p.slug) && !lists.has(e.project_env))
        lists.set(e.project_env, startEnvLists(api, e.project_env));
  const fulls = await Promise.all(
    owners.map(async (p) => {
      const first = p.envs?.list?.[0]?.project_env;
      return first ? { summary: p, full: await api.getProject(first) } : { summary: p, full: p };
    }),
  );

  const envReads: Promise<void>[] = [];
  for (const { summary, full } of fulls) {
    state.projects.push({
      slug: summary.slug,
      name: full.name ?? summary.name ?? '',
      ...(full.description !== undefined ? { description: full.description } : {}),
    });
    const envList: WireEnv[] = full.envs?.list ?? summary.envs?.list ?? [];
    projectEnvs[summary.slug] = envList.map((e) => e.project_env).sort();
    for (const e of envList) {
      if (!wanted(e.project_env, summary.slug)) continue;
      const env: LiveEnv = {
        id: e.id ?? e.project_env,
        project: summary.slug,
        projectEnv: e.project_env,
        type: e.type ?? e.project_env.slice(summary.slug.length + 1),
        ...(e.url !== undefined ? { url: e.url } : {}),
      };
      state.envs.push(env);
      const started = lists.get(e.project_env);
      lists.delete(e.project_env);
      envReads.push(readEnv(api, env, e.templates, state, started ?? startEnvLists(api, e.project_env)));
    }
  }
  // An environment the project list showed and the project read did not (deleted in between)
  // is not read: its lists' answers are dropped.
  await Promise.all(envReads);
  sortLive(state);
  return {
    state,
    duplicates: findDuplicates(state),
    fingerprints: opts.fingerprints === false ? {} : fingerprints(state),
    projectEnvs,
  };
}

/** One environment's live state, read on its own (readLiveStream): sorted as readLiveState sorts the whole. */
export interface LiveEnvRead {
  env: LiveEnv;
  state: LiveState;
  duplicates: DuplicateLive[];
  fingerprints: Record<string, string>;
}

/** What readLiveStream knows once the project list and the projects are read. */
export interface LiveHead {
  /** The live projects in scope (sorted), and their environments in scope (sorted): the ones `envs()` yields. */
  projects: LiveState['projects'];
  envs: LiveEnv[];
  /** Fingerprints of the projects and environments (empty when not asked for). */
  fingerprints: Record<string, string>;
  projectEnvs: Record<string, string[]>;
  /** With readLiveStream's `envsElsewhere`: each environment's templates as its project's read showed them (readEnvAlone's `embedded`). */
  embedded?: Record<string, WireTemplate[] | undefined>;
}

export interface LiveStream {
  head: Promise<LiveHead>;
  /** The environments of the head, one at a time in sorted order; each read is released once the next is asked for. */
  envs(): AsyncGenerator<LiveEnvRead>;
  /** Stops reading (the remaining environments are not wanted). */
  close(): void;
}

/** A whole stream in one state: readLiveState's result, read environment by environment (tests compare the two). */
export async function collectLiveStream(stream: LiveStream): Promise<LiveReadResult> {
  const head = await stream.head;
  const state = emptyLiveState();
  state.projects.push(...head.projects);
  state.envs.push(...head.envs);
  const prints: Record<string, string>[] = [head.fingerprints];
  const duplicates: DuplicateLive[] = [];
  for await (const r of stream.envs()) {
    state.templates.push(...r.state.templates);
    state.clients.push(...r.state.clients);
    state.endpoints.push(...r.state.endpoints);
    if (r.state.records?.length) (state.records ??= []).push(...r.state.records);
    prints.push(r.fingerprints);
    duplicates.push(...r.duplicates);
  }
  duplicates.sort((a, b) => Number(b.address.startsWith('template.')) - Number(a.address.startsWith('template.')));
  const fingerprints: Record<string, string> = {};
  for (const prefix of ['project.', 'env.', 'template.', 'client.', 'endpoint.']) {
    for (const p of prints) for (const [k, v] of Object.entries(p)) if (k.startsWith(prefix)) fingerprints[k] = v;
  }
  return { state, duplicates, fingerprints, projectEnvs: head.projectEnvs };
}

/**
 * How many environments are read ahead of the one being planned: a few while their sizes are
 * unknown (each first page tells its total), and more only while the clients they hold stay
 * under CLIENTS_AHEAD. The working set of a fleet's plan is then its largest environments, not
 * the fleet, and the reads in flight stay near the transport's limit.
 */
const ENVS_AHEAD_UNKNOWN = 8;
const CLIENTS_AHEAD = 25_000;

/**
 * The live state of a scope, environment by environment (DESIGN.md "engine/"): the same requests
 * as readLiveState (one project list, one project read per project, each environment's pages),
 * but an environment's clients are held only from its first page until the caller moves past it.
 * Concatenated, the environments' states are readLiveState's state.
 */
export function readLiveStream(
  api: KmsClient,
  scope: LiveScope,
  opts: ReadOptions & {
    listed?: Promise<WireProject[]>;
    /** Only the head is read here: the environments are read by readEnvAlone elsewhere (engine/plan-threads.ts), `envs()` yields nothing. */
    envsElsewhere?: boolean;
  } = {},
): LiveStream {
  const inScope = new Set(scope.envs);
  const defined = new Set(scope.projects);
  const wanted = (pe: string, project: string) =>
    inScope.has(pe) || (defined.has(project) && scope.alsoRead?.(pe) === true);
  const projectsWanted = new Set([...scope.projects, ...scope.envs.map((e) => e.replace(/-[a-z][a-z0-9]*$/, ''))]);
  const withPrints = opts.fingerprints !== false;
  let closed = false;
  // Environment reads, started in order as the window allows (see ENVS_AHEAD_*): an environment's
  // lists start first; once the projects are read (its templates known), so does its conversion,
  // so the pages are converted as they arrive, as readLiveState's are.
  interface Slot {
    pe: string;
    lists?: EnvLists;
    total?: number;
    read?: Promise<LiveEnvRead>;
  }
  const order: Slot[] = [];
  let next = 0;
  let consumed = 0;
  let known: { envs: Map<string, LiveEnv>; embedded: Map<string, WireTemplate[] | undefined> } | undefined;
  const startRead = (slot: Slot) => {
    const env = known?.envs.get(slot.pe);
    if (!env || !slot.lists || slot.read) return;
    const lists = slot.lists;
    slot.read = (async () => {
      const state = emptyLiveState();
      state.envs.push(env);
      await readEnv(api, env, known!.embedded.get(env.projectEnv), state, lists);
      sortLive(state);
      return { env, state, duplicates: findDuplicates(state), fingerprints: withPrints ? envFingerprints(state) : {} };
    })();
    slot.read.catch(() => undefined); // awaited by envs(); a read nobody asks for any more fails for nobody
  };
  const start = (slot: Slot) => {
    slot.lists = startEnvLists(api, slot.pe, (total) => {
      slot.total = total;
      pump();
    });
    startRead(slot);
  };
  const pump = () => {
    if (opts.envsElsewhere) return;
    if (next < consumed) next = consumed;
    while (!closed && next < order.length) {
      const slot = order[next]!;
      if (!slot.lists) {
        let unknown = 0;
        let held = 0;
        for (let i = consumed; i < next; i++) {
          const o = order[i]!;
          if (!o.lists) continue;
          if (o.total === undefined) unknown++;
          else held += o.total;
        }
        if (next > consumed && (unknown >= ENVS_AHEAD_UNKNOWN || held >= CLIENTS_AHEAD)) return;
        start(slot);
      }
      next++;
    }
  };
  const head = (async (): Promise<LiveHead> => {
    const summaries = await (opts.listed ?? api.listProjects());
    const owners = summaries.filter(
      (p) => projectsWanted.has(p.slug) || (p.envs?.list ?? []).some((e) => inScope.has(e.project_env)),
    );
    // The first environments' lists start beside the project reads, as readLiveState's do.
    const early = owners
      .flatMap((p) => (p.envs?.list ?? []).filter((e) => wanted(e.project_env, p.slug)).map((e) => e.project_env))
      .sort(cmp);
    for (const pe of early) order.push({ pe });
    pump();
    const fulls = await Promise.all(
      owners.map(async (p) => {
        const first = p.envs?.list?.[0]?.project_env;
        return first ? { summary: p, full: await api.getProject(first) } : { summary: p, full: p };
      }),
    );
    const state = emptyLiveState();
    const projectEnvs: Record<string, string[]> = {};
    const embedded = new Map<string, WireTemplate[] | undefined>();
    for (const { summary, full } of fulls) {
      state.projects.push({
        slug: summary.slug,
        name: full.name ?? summary.name ?? '',
        ...(full.description !== undefined ? { description: full.description } : {}),
      });
      const envList: WireEnv[] = full.envs?.list ?? summary.envs?.list ?? [];
      projectEnvs[summary.slug] = envList.map((e) => e.project_env).sort();
      for (const e of envList) {
        if (!wanted(e.project_env, summary.slug) || embedded.has(e.project_env)) continue;
        state.envs.push({
          id: e.id ?? e.project_env,
          project: summary.slug,
          projectEnv: e.project_env,
          type: e.type ?? e.project_env.slice(summary.slug.length + 1),
          ...(e.url !== undefined ? { url: e.url } : {}),
        });
        embedded.set(e.project_env, e.templates);
      }
    }
    sortLive(state);
    // The order of the reads follows the environments the projects show (an environment the
    // project list showed and the project read did not is not read: its lists' answers are dropped).
    const started = new Map(order.map((o) => [o.pe, o]));
    order.length = 0;
    next = 0;
    for (const e of state.envs) order.push(started.get(e.projectEnv) ?? { pe: e.projectEnv });
    known = { envs: new Map(state.envs.map((e) => [e.projectEnv, e])), embedded };
    if (!opts.envsElsewhere) for (const slot of order) startRead(slot);
    pump();
    const fingerprints: Record<string, string> = {};
    if (withPrints) {
      for (const p of state.projects) fingerprints[address.project(p.slug)] = fingerprint(p);
      for (const e of state.envs) fingerprints[address.env(e.projectEnv)] = fingerprint(e);
    }
    return {
      projects: state.projects,
      envs: state.envs,
      fingerprints,
      projectEnvs,
      ...(opts.envsElsewhere ? { embedded: Object.fromEntries(embedded) } : {}),
    };
  })();
  head.catch(() => undefined); // awaited by the caller
  return {
    head,
    close() {
      closed = true;
    },
    async *envs() {
      const h = await head;
      if (opts.envsElsewhere) return;
      for (let i = 0; i < h.envs.length; i++) {
        const slot = order[i]!;
        consumed = i;
        if (!slot.lists) start(slot);
        if (next <= i) next = i + 1;
        const read = await slot.read!;
        delete slot.lists;
        delete slot.read;
        consumed = i + 1;
        pump();
        yield read;
      }
    },
  };
}

/**
 * One environment of a head read with `envsElsewhere` (readLiveStream), read on its own: the same
 * requests and the same result as the stream's read of it (engine/plan-threads.ts, in a worker thread).
 */
export async function readEnvAlone(
  api: KmsClient,
  env: LiveEnv,
  embedded: WireTemplate[] | undefined,
  opts: ReadOptions = {},
): Promise<LiveEnvRead> {
  const state = emptyLiveState();
  state.envs.push(env);
  await readEnv(api, env, embedded, state, startEnvLists(api, env.projectEnv));
  sortLive(state);
  return {
    env,
    state,
    duplicates: findDuplicates(state),
    fingerprints: opts.fingerprints !== false ? envFingerprints(state) : {},
  };
}

/**
 * The paged lists of one environment, started before its templates are known: client pages are
 * kept as they arrive until `convertWith` is given the template names, then converted on arrival
 * (a 100,000-client environment is never held twice).
 */
interface EnvLists {
  clients: Promise<void>;
  endpoints: Promise<WireEndpoint[]>;
  /** Converts the pages read so far and those still to come (templates by id); the result is in page order. */
  convertWith(names: Map<string, { id: string; name: string }>): void;
  /** Client pages in page order (after `clients` resolved), and the items lacking fields the diff compares. */
  pages: LiveClient[][];
  incomplete: WireClient[];
  cidrs: (list: string[] | undefined) => readonly string[];
}

function startEnvLists(api: KmsClient, pe: string, onTotal?: (total: number) => void): EnvLists {
  let names: Map<string, { id: string; name: string }> | undefined;
  const waiting: [WireClient[], number][] = [];
  const pages: LiveClient[][] = [];
  const incomplete: WireClient[] = [];
  const cidrs = cidrMemo();
  // Indexed loops in this file's per-client code: it runs mostly before V8 optimizes it, and
  // there a for-of allocates an iterator result per item.
  const convert = (page: WireClient[], n: number) => {
    // Kept in page order: a service that lists in name order hands the sort a sorted list.
    const out: LiveClient[] = (pages[n - 1] = []);
    for (let i = 0; i < page.length; i++) {
      const c = page[i]!;
      if (clientComplete(c)) out.push(toClient(pe, c, names!, cidrs));
      else incomplete.push(c);
    }
  };
  const clients = api.forEachClientPage(pe, (page, n, pages) => {
    if (n === 1) onTotal?.(pages * Math.max(page.length, 1));
    if (names) convert(page, n);
    else waiting.push([page, n]);
  });
  const endpoints = api.listEndpoints(pe);
  // A list may fail before readEnv awaits it (while the project is read) or never be awaited
  // (its environment was deleted meanwhile): handled here, so that is not an unhandled rejection;
  // readEnv still awaits the lists themselves and gets their errors.
  clients.catch(() => undefined);
  endpoints.catch(() => undefined);
  return {
    clients,
    endpoints,
    pages,
    incomplete,
    cidrs,
    convertWith(known) {
      names = known;
      for (const [page, n] of waiting.splice(0)) convert(page, n);
    },
  };
}

async function readEnv(
  api: KmsClient,
  env: LiveEnv,
  embedded: WireTemplate[] | undefined,
  state: LiveState,
  lists: EnvLists,
) {
  const pe = env.projectEnv;
  const readTemplates = async () => {
    const templates = embedded?.every((t) => t.id && t.rateLimitDay !== undefined)
      ? embedded
      : await api.listTemplates(pe);
    const names = new Map<string, { id: string; name: string }>();
    for (const t of templates) {
      state.templates.push(toTemplate(pe, t));
      names.set(t.id, t);
    }
    lists.convertWith(names);
    return names;
  };
  const [names, , endpoints] = await Promise.all([readTemplates(), lists.clients, lists.endpoints]);
  // List items lacking a field the diff compares are read one by one (the contract says they are complete).
  const completed = await Promise.all(lists.incomplete.map((c) => api.getClient(clientId(c), pe)));
  for (const page of lists.pages) if (page) for (let i = 0; i < page.length; i++) state.clients.push(page[i]!);
  for (const c of completed) state.clients.push(toClient(pe, c, names, lists.cidrs));
  // Run-lock records (apply/run-lock.ts) belong to kms-sync's own runs, not to any configuration;
  // inventory records (engine/inventory.ts) are kept aside for the plan (read one by one when the
  // list leaves their metadata out: the contract's list example shows none).
  const records: Promise<LiveRecord>[] = [];
  for (const e of endpoints) {
    if (!e.path.startsWith('/__kms-sync/')) state.endpoints.push(toEndpoint(pe, e));
    else if (e.path.startsWith(INVENTORY_RECORD_PREFIX))
      records.push(
        (e.metadata !== undefined
          ? Promise.resolve(e)
          : api.getEndpoint(pe, `${e.method.toUpperCase()}:${e.path}`)
        ).then((r) => ({ projectEnv: pe, path: e.path, metadata: asObject(r.metadata) ?? {} })),
      );
  }
  if (records.length) (state.records ??= []).push(...(await Promise.all(records)));
}

/** Sorts by a key computed once per item (not once per comparison). */
function sortByKey<T>(items: T[], key: (x: T) => string): void {
  const keyed = items.map((item) => ({ k: key(item), item }));
  keyed.sort((a, b) => (a.k < b.k ? -1 : a.k > b.k ? 1 : 0));
  for (let i = 0; i < keyed.length; i++) items[i] = keyed[i]!.item;
}

const cmp = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0);
const keyOrder = (a: LiveKey, b: LiveKey) =>
  cmp(a.name, b.name) || cmp(a.createdAt ?? '', b.createdAt ?? '') || cmp(a.id, b.id);
/** Strings without a NUL: joined with NULs they sort exactly as compared part by part. */
const plainPart = (x: unknown) => typeof x === 'string' && !x.includes('\u0000');

function sortLive(s: LiveState) {
  sortByKey(s.projects, (p) => p.slug);
  sortByKey(s.envs, (e) => e.projectEnv);
  sortByKey(s.templates, (t) => `${t.projectEnv}\u0000${t.name}\u0000${t.id}`);
  // Clients and keys: compared field by field when that gives the order of the NUL-joined key
  // (always, in practice), sparing two strings and a wrapper per client.
  if (s.clients.every((c) => plainPart(c.projectEnv) && plainPart(c.name) && plainPart(c.id))) {
    s.clients.sort((a, b) => cmp(a.projectEnv, b.projectEnv) || cmp(a.name, b.name) || cmp(a.id, b.id));
  } else sortByKey(s.clients, (c) => `${c.projectEnv}\u0000${c.name}\u0000${c.id}`);
  for (let i = 0; i < s.clients.length; i++) {
    const c = s.clients[i]!;
    if (c.keys.length < 2) continue;
    if (
      c.keys.every((k) => plainPart(k.name) && (k.createdAt === undefined || plainPart(k.createdAt)) && plainPart(k.id))
    ) {
      sortInPlace(c.keys, keyOrder);
    } else sortByKey(c.keys, (k) => `${k.name}\u0000${k.createdAt ?? ''}\u0000${k.id}`);
  }
  sortByKey(s.endpoints, (e) => `${e.projectEnv}\u0000${e.method}:${e.path}`);
}

/**
 * False when the (sorted) state provably has no two templates or clients with one address, the
 * usual case, found without building an address per resource: in sorted order two resources with
 * one identity are neighbours. Names with a `/` or a NUL (which could make different identities
 * share an address, or sort apart) get the full check.
 */
function mayHaveDuplicates(s: LiveState): boolean {
  const plain = (x: string) => typeof x === 'string' && !x.includes('/') && !x.includes('\u0000');
  for (const list of [s.templates, s.clients] as { projectEnv: string; name: string }[][]) {
    let prev: { projectEnv: string; name: string } | undefined;
    for (let i = 0; i < list.length; i++) {
      const x = list[i]!;
      if (!plain(x.projectEnv) || !plain(x.name) || (prev && prev.projectEnv === x.projectEnv && prev.name === x.name))
        return true;
      prev = x;
    }
  }
  return false;
}

function findDuplicates(s: LiveState): DuplicateLive[] {
  if (!mayHaveDuplicates(s)) return [];
  const seen = new Map<string, string[]>();
  const note = (addr: string, id: string) => {
    const ids = seen.get(addr);
    if (ids) ids.push(id);
    else seen.set(addr, [id]);
  };
  for (const t of s.templates) note(address.template(t.projectEnv, t.name), t.id);
  // Keys sharing a name are rotation generations, not duplicates (plan/key-health.ts).
  for (const c of s.clients) note(address.client(c.projectEnv, c.name), c.id);
  return [...seen].filter(([, ids]) => ids.length > 1).map(([addr, ids]) => ({ address: addr, ids }));
}

function fingerprints(s: LiveState): Record<string, string> {
  const out: Record<string, string> = {};
  for (const p of s.projects) out[address.project(p.slug)] = fingerprint(p);
  for (const e of s.envs) out[address.env(e.projectEnv)] = fingerprint(e);
  return envFingerprints(s, out);
}

/** The fingerprints of what the environments hold (templates, clients, endpoints), in readLiveState's order. */
function envFingerprints(s: LiveState, out: Record<string, string> = {}): Record<string, string> {
  for (const t of s.templates) out[`${address.template(t.projectEnv, t.name)}#${t.id}`] = fingerprint(t);
  for (const c of s.clients) out[`${address.client(c.projectEnv, c.name)}#${c.id}`] = clientFingerprint(c);
  for (const e of s.endpoints) out[address.endpoint(e.projectEnv, e.method, e.path)] = fingerprint(e);
  return out;
}

export type { WireProject };
