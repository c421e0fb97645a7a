// Read stacks → documents in the shape of a kms-sync/v1 YAML file, each field mapped back to the
// construct path and attribute it came from. The configuration builder (src/config) then applies
// the very same schema checks, normalisation, reference checks and duplicate-identity rule as for
// YAML files, across YAML and CDKTF alike; problems point at `<construct path>.<attribute>`.
import path from 'node:path';
import type { JsonValue, SourceLocation } from '../model/index.js';
import { RESOURCE_MAPPINGS, STORE_FIELDS, splitProjectEnv } from './mapping.js';
import type { ReadStack, StackProblem, SynthesizedStack } from './stack-reader.js';

export type PathSegment = string | number;

/** Same shape as the configuration layer's Diagnostic: a place (the model's) and what is wrong. */
export type Diagnostic = SourceLocation & { message: string };

/** A document in the YAML format produced by this front end, with its own places. */
export interface ForeignDocument {
  file: string;
  value: unknown;
  locate(segments: readonly PathSegment[], atKey: boolean): { line: number; column: number; path: string };
}

interface Target {
  /** Construct path plus attribute, as shown. */
  path: string;
  /** Where that is in cdk.tf.json. */
  jsonPath: PathSegment[];
}

type Obj = Record<string, unknown>;

const COLLECTION: Record<string, string> = {
  kms_template: 'templates',
  kms_client: 'clients',
  kms_endpoint: 'endpoints',
};

function setPath(target: Obj, dotted: string, value: JsonValue): void {
  const parts = dotted.split('.');
  let o = target;
  for (const p of parts.slice(0, -1)) o = (o[p] ??= {}) as Obj;
  o[parts[parts.length - 1]!] = value;
}

function formatRest(rest: readonly PathSegment[]): string {
  return rest
    .map((s) => (typeof s === 'number' ? `[${s}]` : /^[A-Za-z_][\w-]*$/.test(s) ? `.${s}` : `[${JSON.stringify(s)}]`))
    .join('');
}

/**
 * line:column of paths in a cdk.tf.json text, from one linear scan that records where each value
 * starts (up to a depth that covers resources, their attributes and list items, and provider
 * blocks). Lookups fall back to the deepest recorded ancestor.
 */
class Positions {
  private offsets: Map<string, number> | undefined;
  private lineStarts: number[] | undefined;
  private readonly text: string;
  constructor(text: string) {
    this.text = text;
  }

  at(jsonPath: readonly PathSegment[]): { line: number; column: number } {
    this.offsets ??= indexJson(this.text, 6);
    let offset = 0;
    for (let k = jsonPath.length; k >= 0; k--) {
      const o = this.offsets.get(jsonPath.slice(0, k).join('\u0000'));
      if (o !== undefined) {
        offset = o;
        break;
      }
    }
    if (!this.lineStarts) {
      this.lineStarts = [0];
      for (let i = this.text.indexOf('\n'); i >= 0; i = this.text.indexOf('\n', i + 1)) this.lineStarts.push(i + 1);
    }
    let lo = 0;
    let hi = this.lineStarts.length - 1;
    while (lo < hi) {
      const mid = (lo + hi + 1) >> 1;
      if (this.lineStarts[mid]! <= offset) lo = mid;
      else hi = mid - 1;
    }
    return { line: lo + 1, column: offset - this.lineStarts[lo]! + 1 };
  }
}

/** Offsets of the values of a JSON text by path (segments joined by NUL), down to `maxDepth`. */
function indexJson(text: string, maxDepth: number): Map<string, number> {
  const out = new Map<string, number>();
  let i = 0;
  const ws = () => {
    for (let c = text.charCodeAt(i); c === 32 || c === 10 || c === 13 || c === 9; c = text.charCodeAt(++i));
  };
  /** Skips a string starting at i (a quote); returns its value when `keep`. */
  const string = (keep: boolean): string => {
    const start = i;
    let end = text.indexOf('"', i + 1);
    for (;;) {
      let backslashes = 0;
      while (text.charCodeAt(end - 1 - backslashes) === 92) backslashes++;
      if (end < 0 || backslashes % 2 === 0) break;
      end = text.indexOf('"', end + 1);
    }
    i = end < 0 ? text.length : end + 1;
    if (!keep) return '';
    const raw = text.slice(start + 1, i - 1);
    return raw.includes('\\') ? (JSON.parse(text.slice(start, i)) as string) : raw;
  };
  const value = (key: string, depth: number): void => {
    ws();
    if (depth <= maxDepth) out.set(key, i);
    const c = text.charCodeAt(i);
    if (c === 123 || c === 91) {
      // { [
      const object = c === 123;
      i++;
      ws();
      if (text.charCodeAt(i) === (object ? 125 : 93)) {
        i++;
        return;
      }
      for (let n = 0; ; n++) {
        ws();
        let child = '';
        if (object) {
          child = string(depth < maxDepth);
          ws();
          i++; // :
        } else if (depth < maxDepth) child = String(n);
        value(depth === 0 ? child : `${key}\u0000${child}`, depth + 1);
        ws();
        if (text.charCodeAt(i) === 44) {
          i++;
          continue;
        } // ,
        i++; // } ]
        return;
      }
    }
    if (c === 34) {
      string(false);
      return;
    }
    for (
      let d = text.charCodeAt(i);
      i < text.length && d !== 44 && d !== 93 && d !== 125 && d !== 32 && d !== 10 && d !== 13 && d !== 9;
      d = text.charCodeAt(++i)
    );
  };
  value('', 0);
  return out;
}

export interface StackDocuments {
  documents: ForeignDocument[];
  diagnostics: Diagnostic[];
  /** provider base_dir values (as written). */
  baseDirs: string[];
}

export function stacksToDocuments(stacks: ReadonlyArray<{ stack: SynthesizedStack; read: ReadStack }>): StackDocuments {
  const documents: ForeignDocument[] = [];
  const diagnostics: Diagnostic[] = [];
  const seenStores = new Set<string>();
  const baseDirs = new Set<string>();
  let owner: { value: string; where: string } | undefined;

  for (const { stack, read } of stacks) {
    const positions = stack.text !== undefined ? new Positions(stack.text) : undefined;
    const place = (jsonPath: readonly PathSegment[]) => positions?.at(jsonPath) ?? { line: 0, column: 0 };
    const problem = (p: StackProblem) =>
      diagnostics.push({ file: stack.file, ...place(p.jsonPath), path: p.path, message: p.message });
    read.problems.forEach(problem);

    // What each document path came from: kept as a list and made into a map on the first lookup
    // (only problems are located: a clean run of 10,000 clients never joins these paths).
    const registered: [PathSegment[], Target][] = [];
    const register = (segs: PathSegment[], t: Target) => {
      registered.push([segs, t]);
    };
    let registry: Map<string, Target> | undefined;
    const doc: Obj = { apiVersion: 'kms-sync/v1' };
    const projects: Obj[] = [];
    const stores: Obj[] = [];

    for (const p of read.providers) {
      const at = ['provider', 'kms', p.index];
      p.stores.forEach((s, j) => {
        const key = JSON.stringify(
          Object.keys(s)
            .sort()
            .map((k) => [k, s[k]]),
        );
        if (seenStores.has(key)) return; // the same store declared in every stack's provider
        seenStores.add(key);
        const base: PathSegment[] = ['stores', stores.length];
        const entry: Obj = {};
        for (const [attr, field] of Object.entries(STORE_FIELDS)) {
          if (!(attr in s)) continue;
          entry[field] = s[attr];
          register([...base, field], {
            path: `${p.label}.secret_store[${j}].${attr}`,
            jsonPath: [...at, 'secret_store', j, attr],
          });
        }
        register(base, { path: `${p.label}.secret_store[${j}]`, jsonPath: [...at, 'secret_store', j] });
        stores.push(entry);
      });
      if (p.baseDir !== undefined) baseDirs.add(p.baseDir);
      if (p.owner !== undefined) {
        const where = `${stack.file}: ${p.label}.owner`;
        if (!owner) {
          owner = { value: p.owner, where };
          doc.owner = p.owner;
          register(['owner'], { path: `${p.label}.owner`, jsonPath: [...at, 'owner'] });
        } else if (owner.value !== p.owner) {
          problem({
            jsonPath: [...at, 'owner'],
            path: `${p.label}.owner`,
            message: `owner "${p.owner}" differs from owner "${owner.value}" at ${owner.where}: one configuration has one owner`,
          });
        }
      }
    }
    if (baseDirs.size > 1) {
      diagnostics.push({
        file: stack.file,
        line: 0,
        column: 0,
        path: 'provider "kms".base_dir',
        message: `providers name different base_dir values (${[...baseDirs].join(', ')}): set one`,
      });
    }

    // A kms_project data source names a project defined elsewhere: YAML's `external: true`.
    for (const x of read.externalProjects ?? []) {
      const idx = projects.length;
      const root: Target = { path: x.constructPath, jsonPath: ['data', 'kms_project', x.name] };
      projects.push({ slug: x.slug, external: true });
      register(['projects', idx], root);
      register(['projects', idx, 'slug'], { path: `${x.constructPath}.slug`, jsonPath: [...root.jsonPath, 'slug'] });
      register(['projects', idx, 'external'], root);
    }

    const clients = new Map<string, { item: Obj; base: PathSegment[] }>();
    const keys: typeof read.resources = [];
    for (const r of read.resources) {
      if (r.type === 'kms_key') {
        keys.push(r);
        continue;
      }
      const m = RESOURCE_MAPPINGS[r.type];
      const root: Target = { path: r.constructPath, jsonPath: ['resource', r.type, r.name] };
      const attrTarget = (attr: string): Target => ({
        path: `${r.constructPath}.${attr}`,
        jsonPath: ['resource', r.type, r.name, attr],
      });
      const item: Obj = {};
      const idx = projects.length;
      let base: PathSegment[];
      if (r.type === 'kms_project') {
        base = ['projects', idx];
        projects.push(item);
      } else if (r.type === 'kms_environment') {
        base = ['projects', idx, 'environments', 0];
        projects.push({ slug: r.values.project, environments: [item] });
        register(['projects', idx, 'slug'], attrTarget('project'));
      } else {
        const pe = splitProjectEnv(String(r.values.project_env));
        if (!pe) continue; // reported by the reader
        const coll = COLLECTION[r.type]!;
        base = ['projects', idx, 'environments', 0, coll, 0];
        projects.push({ slug: pe.project, environments: [{ type: pe.type, [coll]: [item] }] });
        register(['projects', idx, 'slug'], attrTarget('project_env'));
        register(['projects', idx, 'environments', 0, 'type'], attrTarget('project_env'));
        register(['projects', idx, 'environments', 0], root);
        if (r.type === 'kms_client') clients.set(`${r.values.project_env}\u0000${r.values.name}`, { item, base });
      }
      register(['projects', idx], root);
      register(base, root);
      for (const [attr, field] of Object.entries(m.fields)) {
        if (!(attr in r.values)) continue;
        setPath(item, field, r.values[attr]!);
        register([...base, ...field.split('.')], attrTarget(attr));
      }
    }
    for (const r of keys) {
      const client = clients.get(`${r.values.project_env}\u0000${r.values.client}`);
      if (!client) {
        problem({
          jsonPath: ['resource', r.type, r.name, 'client'],
          path: `${r.constructPath}.client`,
          message: `client "${String(r.values.client)}" of ${String(r.values.project_env)} is not a kms_client of stack ${stack.name}: declare a client's keys in the same stack as the client`,
        });
        continue;
      }
      const list = (client.item.keys ??= []) as Obj[];
      const base = [...client.base, 'keys', list.length];
      const item: Obj = {};
      list.push(item);
      register(base, { path: r.constructPath, jsonPath: ['resource', r.type, r.name] });
      for (const [attr, field] of Object.entries(RESOURCE_MAPPINGS.kms_key.fields)) {
        if (!(attr in r.values)) continue;
        setPath(item, field, r.values[attr]!);
        register([...base, ...field.split('.')], {
          path: `${r.constructPath}.${attr}`,
          jsonPath: ['resource', r.type, r.name, attr],
        });
      }
    }

    if (projects.length === 0 && stores.length === 0 && doc.owner === undefined) continue;
    if (stores.length) doc.stores = stores;
    doc.projects = projects;
    register([], { path: '', jsonPath: [] });
    documents.push({
      file: stack.file,
      value: doc,
      locate(segments) {
        registry ??= new Map(registered.map(([segs, t]) => [segs.join('\u0000'), t]));
        for (let i = segments.length; i >= 0; i--) {
          const t = registry.get(segments.slice(0, i).join('\u0000'));
          if (!t) continue;
          const rest = segments.slice(i);
          return { ...place([...t.jsonPath, ...rest]), path: `${t.path}${formatRest(rest)}`.replace(/^\./, '') };
        }
        return { line: 0, column: 0, path: '' };
      },
    });
  }
  return { documents, diagnostics, baseDirs: [...baseDirs] };
}

/** `stack "NAME"` for stacks synthesized into a temporary folder, else the file relative to cwd. */
export function stackFileLabel(name: string, file: string | undefined, cwd: string): string {
  return file ? path.relative(cwd, file) || file : `stack "${name}"`;
}
