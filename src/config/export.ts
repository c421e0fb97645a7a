// DesiredState → YAML in the kms-sync/v1 format: the inverse of loadDesiredState. Nested per project
// and environment, deterministic, and only known fields (no raw key can leak through).
import { yamlLib } from './yaml-lib.js';
import {
  groupBy,
  type DesiredClient,
  type DesiredEndpoint,
  type DesiredEnv,
  type DesiredKey,
  type DesiredState,
  type DesiredTemplate,
  type JsonObject,
  type JsonValue,
} from '../model/index.js';
import { escapeUnsafe } from '../model/printable.js';
import { escapeInterpolation } from './interpolate.js';
import { SCHEMA_ID, modeline } from './modeline.js';

export interface ExportOptions {
  /** `$schema` value of the modeline (default: the schema's `$id`); see schemaRefFor. */
  schema?: string;
  /** Comment lines placed under the modeline. */
  header?: string[];
}

type Out = { [k: string]: unknown };

const cmp = (a: string, b: string): number => (a < b ? -1 : a > b ? 1 : 0);

/** Strings are escaped so that `${env:...}` in live data is not interpolated when loaded back. */
function text(value: string): string {
  return escapeInterpolation(value);
}

function json(value: JsonValue): JsonValue {
  if (typeof value === 'string') return text(value);
  if (Array.isArray(value)) return value.map(json);
  if (value && typeof value === 'object') {
    const out: JsonObject = {};
    for (const k of Object.keys(value).sort(cmp)) out[k] = json(value[k] as JsonValue);
    return out;
  }
  return value;
}

function put(target: Out, key: string, value: unknown): void {
  if (value === undefined) return;
  target[key] = typeof value === 'string' ? text(value) : value;
}

function templateOut(t: DesiredTemplate): Out {
  const o: Out = {};
  put(o, 'name', t.name);
  put(o, 'rateLimitDay', t.rateLimitDay);
  put(o, 'maxClients', t.maxClients);
  if (t.protected) o.protected = true;
  return o;
}

function keyOut(k: DesiredKey): Out {
  const o: Out = {};
  put(o, 'name', k.name);
  put(o, 'ttl', k.ttl);
  put(o, 'expiresAt', k.expiresAt);
  put(o, 'autoRotate', k.autoRotate);
  if (k.rotation) {
    const r: Out = {};
    put(r, 'window', k.rotation.window);
    put(r, 'overlap', k.rotation.overlap);
    o.rotation = r;
  }
  if (k.secret) {
    const s: Out = {};
    put(s, 'store', k.secret.store);
    put(s, 'name', k.secret.name);
    o.secret = s;
  }
  if (k.protected) o.protected = true;
  return o;
}

function clientOut(c: DesiredClient): Out {
  const o: Out = {};
  put(o, 'name', c.name);
  put(o, 'type', c.type);
  put(o, 'template', c.template);
  if (c.protected) o.protected = true;
  if (c.ipWhitelist) o.ipWhitelist = [...c.ipWhitelist].sort(cmp);
  if (c.metadata) o.metadata = json(c.metadata);
  if (c.keys.length > 0) o.keys = [...c.keys].sort((a, b) => cmp(a.name, b.name)).map(keyOut);
  return o;
}

function endpointOut(e: DesiredEndpoint): Out {
  const o: Out = {};
  put(o, 'method', e.method.toUpperCase());
  put(o, 'path', e.path);
  put(o, 'name', e.name);
  put(o, 'description', e.description);
  if (e.protected) o.protected = true;
  for (const f of ['request', 'response', 'metadata'] as const) {
    const v = e[f];
    if (v) o[f] = json(v);
  }
  return o;
}

/** Splits `<slug>-<type>` using the known project slugs (env types never contain a hyphen). */
function splitProjectEnv(projectEnv: string, slugs: readonly string[]): { project: string; type: string } {
  const known = slugs.filter((s) => projectEnv.startsWith(`${s}-`)).sort((a, b) => b.length - a.length)[0];
  if (known !== undefined) return { project: known, type: projectEnv.slice(known.length + 1) };
  const i = projectEnv.lastIndexOf('-');
  return { project: projectEnv.slice(0, Math.max(i, 0)), type: projectEnv.slice(i + 1) };
}

export function desiredStateToYaml(state: DesiredState, opts: ExportOptions = {}): string {
  const slugs = state.projects.map((p) => p.slug);
  const byEnv = <T extends { projectEnv: string }>(items: readonly T[]): Map<string, T[]> =>
    groupBy(items, (it) => it.projectEnv);
  const templates = byEnv(state.templates);
  const clients = byEnv(state.clients);
  const endpoints = byEnv(state.endpoints);

  // Every environment that anything points to; those absent from state.envs become references.
  const envs = new Map<string, { project: string; type: string; def?: DesiredEnv }>();
  for (const e of state.envs) envs.set(e.projectEnv, { project: e.project, type: e.type, def: e });
  for (const pe of [...templates.keys(), ...clients.keys(), ...endpoints.keys()]) {
    if (!envs.has(pe)) envs.set(pe, splitProjectEnv(pe, slugs));
  }
  const projectSlugs = new Set([...slugs, ...[...envs.values()].map((e) => e.project)]);

  const projects: Out[] = [];
  for (const slug of [...projectSlugs].sort(cmp)) {
    const p = state.projects.find((x) => x.slug === slug);
    const o: Out = { slug };
    if (!p && state.externalProjects?.some((x) => x.slug === slug)) o.external = true;
    if (p) {
      put(o, 'name', p.name);
      put(o, 'description', p.description);
      if (p.protected) o.protected = true;
    }
    const environments: Out[] = [];
    const own = [...envs.entries()].filter(([, e]) => e.project === slug).sort(([a], [b]) => cmp(a, b));
    for (const [pe, e] of own) {
      const eo: Out = { type: e.type };
      if (e.def) {
        put(eo, 'url', e.def.url);
        if (e.def.protected) eo.protected = true;
      }
      const t = (templates.get(pe) ?? []).sort((a, b) => cmp(a.name, b.name));
      const c = (clients.get(pe) ?? []).sort((a, b) => cmp(a.name, b.name));
      const ep = (endpoints.get(pe) ?? []).sort((a, b) => cmp(a.path, b.path) || cmp(a.method, b.method));
      if (t.length > 0) eo.templates = t.map(templateOut);
      if (c.length > 0) eo.clients = c.map(clientOut);
      if (ep.length > 0) eo.endpoints = ep.map(endpointOut);
      environments.push(eo);
    }
    if (environments.length > 0) o.environments = environments;
    projects.push(o);
  }

  const root: Out = { apiVersion: 'kms-sync/v1' };
  if (state.owner) put(root, 'owner', state.owner);
  if (state.stores.length > 0) {
    root.stores = [...state.stores]
      .sort((a, b) => cmp(a.name, b.name))
      .map((s) => {
        const o: Out = {};
        put(o, 'name', s.name);
        put(o, 'uri', s.uri);
        if (s.default) o.default = true;
        if (s.options) o.options = json(s.options);
        return o;
      });
  }
  root.projects = projects;

  const { Document, isSeq, visit } = yamlLib();
  const doc = new Document(root, { aliasDuplicateObjects: false });
  // IP lists read best on one line.
  visit(doc, {
    Pair(_, pair) {
      if (isSeq(pair.value) && String((pair.key as { value?: unknown }).value) === 'ipWhitelist')
        pair.value.flow = true;
    },
    // Text a terminal would act on (controls, bidi, line breaks: model/printable.ts) is written
    // double-quoted, where it is spelled as escapes: the output is safe to print and reads back the same.
    Scalar(_, node) {
      if (typeof node.value === 'string' && node.value !== escapeUnsafe(node.value)) node.type = 'QUOTE_DOUBLE';
    },
  });
  const header = [modeline(opts.schema ?? SCHEMA_ID), ...(opts.header ?? []).map((h) => (h ? `# ${h}` : '#'))];
  return `${header.join('\n')}\n${doc.toString({ lineWidth: 0, flowCollectionPadding: false })}`;
}
