// Reads the kms_* resources and kms provider blocks of one synthesized stack (cdk.tf.json) into
// plain values: every expression evaluated (references to other kms_* resources resolve to their
// configured values or natural keys, var.* from TF_VAR_*/tfvars/defaults, local.*), every value
// converted to its schema type. What cannot be known before Terraform applies (computed service
// values, other providers' resources, cross-stack outputs, count/for_each) is a problem naming the
// construct path and attribute.
import { readFileSync } from 'node:fs';
import type { JsonValue } from '../model/index.js';
import { packageFile } from '../model/package-files.js';
import { evaluateJson, ExpressionError } from './expressions.js';
import {
  KMS_RESOURCE_TYPES,
  PROVIDER_NAME,
  PROVIDER_SOURCE,
  RESOURCE_MAPPINGS,
  splitProjectEnv,
  type KmsResourceType,
} from './mapping.js';
import { convertVariable, type VariableValues } from './variables.js';

export interface SynthesizedStack {
  name: string;
  /** Shown as the file in diagnostics: the cdk.tf.json path, or `stack "NAME"` when synthesized into a temporary folder. */
  file: string;
  json: Record<string, unknown>;
  /** Text of a cdk.tf.json that stays on disk: problems then carry its line and column. */
  text?: string;
}

export interface StackProblem {
  /** Path inside cdk.tf.json (for line:column). */
  jsonPath: Array<string | number>;
  /** Construct path and attribute, e.g. `acme/payments/globex.ip_whitelist`. */
  path: string;
  message: string;
}

export interface ReadResource {
  type: KmsResourceType;
  /** Logical id in cdk.tf.json. */
  name: string;
  constructPath: string;
  /** Configured attributes, evaluated and converted to their schema types (nulls left out). */
  values: Record<string, JsonValue>;
}

export interface ReadProvider {
  /** `provider "kms"` or `provider "kms" (alias NAME)`. */
  label: string;
  index: number;
  owner?: string;
  baseDir?: string;
  stores: Array<Record<string, JsonValue>>;
}

/** A `data.kms_project`: a project the stack references without defining it (YAML's `external: true`). */
export interface ReadExternalProject {
  /** Logical id in cdk.tf.json. */
  name: string;
  constructPath: string;
  slug: string;
}

export interface ReadStack {
  resources: ReadResource[];
  /** Projects looked up with a kms_project data source: defined elsewhere. */
  externalProjects?: ReadExternalProject[];
  providers: ReadProvider[];
  problems: StackProblem[];
}

// ------------------------------------------------------------------------------------ schema

interface AttributeSchema {
  type: unknown;
  required?: boolean;
  optional?: boolean;
  computed?: boolean;
}
interface BlockSchema {
  attributes: Record<string, AttributeSchema>;
  block_types?: Record<string, { nesting_mode: string; block: BlockSchema }>;
}
interface ProviderSchema {
  provider: { block: BlockSchema };
  resource_schemas: Record<string, { block: BlockSchema }>;
  data_source_schemas: Record<string, { block: BlockSchema }>;
}

/** Absolute path of `schemas/terraform-provider-kms.json` in the installed package (src/ and dist/ alike). */
export function providerSchemaPath(): string {
  return packageFile('schemas', 'terraform-provider-kms.json');
}

let schemaCache: ProviderSchema | undefined;
export function providerSchema(): ProviderSchema {
  schemaCache ??= (
    JSON.parse(readFileSync(providerSchemaPath(), 'utf8')) as { provider_schemas: Record<string, ProviderSchema> }
  ).provider_schemas[PROVIDER_SOURCE]!;
  return schemaCache;
}

/** Meta-arguments Terraform reads itself: they change nothing in the desired state. */
// timeouts: Terraform's per-operation limits; kms-sync's engine has its own (the client's request limits).
const IGNORED_META = new Set(['//', 'depends_on', 'lifecycle', 'provider', 'timeouts']);
const META_ERRORS: Record<string, string> = {
  count: 'count is not supported: kms-sync needs every resource spelled out (use a TypeScript loop instead)',
  for_each: 'for_each is not supported: kms-sync needs every resource spelled out (use a TypeScript loop instead)',
  provisioner: 'provisioners are not supported: kms-sync does not run them',
  connection: 'connection blocks are not supported: kms-sync does not run provisioners',
};

/** Converts an evaluated value to an attribute's schema type, as Terraform does. */
function coerce(value: JsonValue, type: unknown): JsonValue {
  if (value === null) return null;
  const kind = JSON.stringify(type);
  if (kind === '"dynamic"') return value;
  if (kind === '"string"') {
    if (typeof value === 'string') return value;
    if (typeof value === 'number' || typeof value === 'boolean') return String(value);
    throw new ExpressionError(`expected a string, got ${describe(value)}`);
  }
  if (kind === '"number"') {
    if (typeof value === 'number') return value;
    if (typeof value === 'string' && value.trim() !== '' && Number.isFinite(Number(value))) return Number(value);
    throw new ExpressionError(`expected a number, got ${describe(value)}`);
  }
  if (kind === '"bool"') {
    if (typeof value === 'boolean') return value;
    if (value === 'true' || value === 'false') return value === 'true';
    throw new ExpressionError(`expected true or false, got ${describe(value)}`);
  }
  if (Array.isArray(type) && (type[0] === 'set' || type[0] === 'list')) {
    if (!Array.isArray(value)) throw new ExpressionError(`expected a list, got ${describe(value)}`);
    return value.map((v, i) => {
      try {
        return coerce(v, type[1]);
      } catch (e) {
        throw new ExpressionError(`[${i}]: ${(e as Error).message}`);
      }
    });
  }
  return value;
}

function describe(v: JsonValue): string {
  if (Array.isArray(v)) return 'a list';
  if (v && typeof v === 'object') return 'an object';
  return JSON.stringify(v);
}

const isRecord = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

/** A referenced attribute failed: the root cause is reported where it is, not again here. */
class DependentError extends Error {}

const COMPUTED_HINT = 'it is computed by the service when Terraform applies, so kms-sync cannot know it from the stack';

// ------------------------------------------------------------------------------------ reader

interface Node {
  type: string;
  name: string;
  body: Record<string, unknown>;
  kind: 'resource' | 'data';
  constructPath: string;
  memo: Map<string, { value?: JsonValue; error?: string; busy?: boolean }>;
}

export function readStack(stack: SynthesizedStack, vars: VariableValues): ReadStack {
  return new StackReader(stack, vars).read();
}

class StackReader {
  private readonly schema = providerSchema();
  private readonly problems: StackProblem[] = [];
  private readonly reported = new Set<string>();
  private readonly locals = new Map<string, { value?: JsonValue; error?: string; busy?: boolean }>();

  private readonly stack: SynthesizedStack;
  private readonly vars: VariableValues;
  constructor(stack: SynthesizedStack, vars: VariableValues) {
    this.stack = stack;
    this.vars = vars;
  }

  private section(kind: 'resource' | 'data'): Record<string, Record<string, unknown>> {
    const s = this.stack.json[kind];
    return isRecord(s) ? (s as Record<string, Record<string, unknown>>) : {};
  }

  private node(kind: 'resource' | 'data', type: string, name: string): Node | undefined {
    const byType = this.section(kind)[type];
    const body = isRecord(byType) ? byType[name] : undefined;
    if (!isRecord(body)) return undefined;
    const key = `${kind}.${type}.${name}`;
    let n = this.nodes.get(key);
    if (!n) {
      const meta = isRecord(body['//']) && isRecord(body['//'].metadata) ? body['//'].metadata : {};
      const constructPath =
        typeof meta.path === 'string'
          ? meta.path
          : `${this.stack.name}/${kind === 'data' ? 'data.' : ''}${type}.${name}`;
      n = { type, name, body, kind, constructPath, memo: new Map() };
      this.nodes.set(key, n);
    }
    return n;
  }
  private readonly nodes = new Map<string, Node>();

  private problem(jsonPath: Array<string | number>, path: string, message: string): void {
    const key = `${jsonPath.join('\u0000')}\u0001${message}`;
    if (this.reported.has(key)) return;
    this.reported.add(key);
    this.problems.push({ jsonPath, path, message });
  }

  private schemaOf(n: Node): BlockSchema {
    return (n.kind === 'resource' ? this.schema.resource_schemas[n.type] : this.schema.data_source_schemas[n.type])!
      .block;
  }

  /** The evaluated, converted value of a configured attribute (undefined: not set). */
  private attribute(n: Node, attr: string): JsonValue | undefined {
    let m = n.memo.get(attr);
    if (m?.busy)
      throw new ExpressionError(`${n.type}.${n.name}.${attr} refers to itself through a cycle of references`);
    if (!m) {
      m = { busy: true };
      n.memo.set(attr, m);
      const raw = n.body[attr];
      try {
        if (raw !== undefined) {
          const a = this.schemaOf(n).attributes[attr];
          m.value = coerce(evaluateJson(raw, this.context()), a?.type ?? '"dynamic"');
        }
      } catch (e) {
        m.error = e instanceof DependentError ? '' : (e as Error).message;
        if (!(e instanceof DependentError)) {
          const prefix = n.kind === 'data' ? ['data', n.type, n.name] : ['resource', n.type, n.name];
          this.problem([...prefix, attr], `${n.constructPath}.${attr}`, m.error);
        }
      }
      m.busy = false;
    }
    if (m.error !== undefined) throw new DependentError(m.error);
    return m.value ?? undefined;
  }

  private context() {
    return { resolve: (ref: { parts: Array<string | number>; text: string }) => this.reference(ref.parts, ref.text) };
  }

  private reference(parts: Array<string | number>, text: string): JsonValue {
    const [root, a, b, c, ...rest] = parts;
    const index = (value: JsonValue, path: Array<string | number>): JsonValue => {
      let v: JsonValue = value;
      for (const p of path) {
        if (Array.isArray(v) && typeof p === 'number' && p < v.length) v = v[p]!;
        else if (isRecord(v) && typeof p === 'string' && p in v) v = (v as Record<string, JsonValue>)[p]!;
        else throw new ExpressionError(`${text}: no element ${JSON.stringify(p)}`);
      }
      return v;
    };
    if (root === 'var' && typeof a === 'string') return index(this.variable(a, text), parts.slice(2));
    if (root === 'local' && typeof a === 'string') return index(this.local(a, text), parts.slice(2));
    if (root === 'data') {
      if (a === 'terraform_remote_state') {
        throw new ExpressionError(
          `${text} is a cross-stack reference: kms-sync reads each stack on its own; pass the value as a plain string, or declare both resources in one stack`,
        );
      }
      if (typeof a !== 'string' || typeof b !== 'string' || typeof c !== 'string')
        throw new ExpressionError(`cannot read the reference ${text}`);
      if (!a.startsWith(`${PROVIDER_NAME}_`))
        throw new ExpressionError(
          `${text} refers to a data source of another provider (${a}): kms-sync cannot know its values without Terraform`,
        );
      if (!this.schema.data_source_schemas[a])
        throw new ExpressionError(`${text}: ${a} is not a data source of the kms provider`);
      const n = this.node('data', a, b);
      if (!n) throw new ExpressionError(`${text}: no data source ${a}.${b} in stack ${this.stack.name}`);
      return index(this.known(n, c, text), rest);
    }
    if (typeof root === 'string' && (KMS_RESOURCE_TYPES as readonly string[]).includes(root)) {
      if (typeof a !== 'string' || typeof b !== 'string')
        throw new ExpressionError(`cannot read the reference ${text}`);
      const n = this.node('resource', root, a);
      if (!n) {
        throw new ExpressionError(
          `${text}: no resource ${root}.${a} in stack ${this.stack.name} (references across stacks are not supported: use the natural key as a plain string)`,
        );
      }
      return index(this.known(n, b, text), parts.slice(3));
    }
    if (root === 'module') throw new ExpressionError(`${text}: modules are not supported`);
    if (root === 'count' || root === 'each') throw new ExpressionError(`${text}: count and for_each are not supported`);
    if (root === 'path' || root === 'terraform' || root === 'self')
      throw new ExpressionError(`${text}: ${root}.* is not supported`);
    if (typeof root === 'string' && isRecord(this.section('resource')[root])) {
      throw new ExpressionError(
        `${text} refers to a resource of another provider (${root}): kms-sync cannot know its values without Terraform`,
      );
    }
    throw new ExpressionError(`${text}: unknown reference`);
  }

  /** A value of a kms resource or data source known before apply: configured, or derived from its natural key. */
  private known(n: Node, attr: string, text: string): JsonValue {
    if (n.body[attr] !== undefined && this.schemaOf(n).attributes[attr]) {
      const v = this.attribute(n, attr);
      if (v !== undefined) return v;
    }
    const schema = this.schemaOf(n).attributes[attr];
    if (!schema) throw new ExpressionError(`${text}: ${n.type} has no attribute ${attr}`);
    const derived = this.derived(n, attr);
    if (derived !== undefined) return derived;
    if (schema.computed) throw new ExpressionError(`${text}: ${COMPUTED_HINT}`);
    throw new ExpressionError(`${text}: ${attr} is not set on ${n.type}.${n.name}`);
  }

  /** id, project_env and method_path follow from the natural key. */
  private derived(n: Node, attr: string): JsonValue | undefined {
    const s = (k: string): string => {
      const v = this.attribute(n, k);
      if (typeof v !== 'string') throw new ExpressionError(`${n.type}.${n.name}.${k} is not set`);
      return v;
    };
    if (n.type === 'kms_environment' && (attr === 'project_env' || attr === 'id') && n.kind === 'resource')
      return `${s('project')}-${s('type')}`;
    if (n.type === 'kms_endpoint' && attr === 'method_path') return `${s('method').toUpperCase()}:${s('path')}`;
    if (attr !== 'id') return undefined;
    switch (n.type) {
      case 'kms_project':
        return s('slug');
      case 'kms_environment':
        return s('project_env');
      case 'kms_template':
      case 'kms_client':
        return `${s('project_env')}/${s('name')}`;
      case 'kms_key':
        return `${s('project_env')}/${s('client')}/${s('name')}`;
      case 'kms_endpoint':
        return `${s('project_env')}/${s('method').toUpperCase()}:${s('path')}`;
      default:
        return undefined;
    }
  }

  private variable(name: string, text: string): JsonValue {
    const decls = this.stack.json.variable;
    const decl = isRecord(decls) && isRecord(decls[name]) ? decls[name] : undefined;
    if (!decl) throw new ExpressionError(`${text}: no variable "${name}" is declared in stack ${this.stack.name}`);
    const set = this.vars.values.get(name);
    if (set) {
      try {
        return convertVariable(set.value, decl.type, set.from.startsWith('TF_VAR_'));
      } catch (e) {
        throw new ExpressionError(`variable "${name}" from ${set.from}: ${(e as Error).message}`);
      }
    }
    if ('default' in decl) return convertVariable(decl.default as JsonValue, decl.type, false);
    throw new ExpressionError(
      `variable "${name}" has no value: set TF_VAR_${name} or put it in terraform.tfvars beside cdktf.json`,
    );
  }

  private local(name: string, text: string): JsonValue {
    const locals = this.stack.json.locals;
    if (!isRecord(locals) || !(name in locals))
      throw new ExpressionError(`${text}: no local "${name}" in stack ${this.stack.name}`);
    let m = this.locals.get(name);
    if (m?.busy) throw new ExpressionError(`local.${name} refers to itself through a cycle of references`);
    if (!m) {
      m = { busy: true };
      this.locals.set(name, m);
      try {
        m.value = evaluateJson(locals[name], this.context());
      } catch (e) {
        m.error = (e as Error).message;
      }
      m.busy = false;
    }
    if (m.error !== undefined) throw new ExpressionError(`local.${name}: ${m.error}`);
    return m.value!;
  }

  // ---------------------------------------------------------------------------------- whole stack

  read(): ReadStack {
    const resources: ReadResource[] = [];
    const section = this.section('resource');
    for (const type of KMS_RESOURCE_TYPES) {
      const byType = section[type];
      if (!isRecord(byType)) continue;
      for (const name of Object.keys(byType).sort()) {
        const n = this.node('resource', type, name);
        if (!n) continue;
        const r = this.readResource(n);
        if (r) resources.push(r);
      }
    }
    // A kms-looking type the schema does not know is a typo or a newer schema: say so.
    for (const type of Object.keys(section)) {
      if (type.startsWith(`${PROVIDER_NAME}_`) && !(KMS_RESOURCE_TYPES as readonly string[]).includes(type)) {
        for (const name of Object.keys(section[type] ?? {})) {
          const n = this.node('resource', type, name);
          this.problem(
            ['resource', type, name],
            n?.constructPath ?? `${type}.${name}`,
            `${type} is not a resource of the kms provider (known: ${KMS_RESOURCE_TYPES.join(', ')})`,
          );
        }
      }
    }
    return {
      resources,
      externalProjects: this.readExternalProjects(),
      providers: this.readProviders(),
      problems: this.problems,
    };
  }

  /**
   * `data "kms_project"` (DataKmsProject, KmsExternalProject): the Terraform way to name a project
   * that exists and is managed elsewhere. kms-sync reads it as YAML's `external: true`: never
   * created, renamed or deleted, and only the environments the stack names are in scope.
   */
  private readExternalProjects(): ReadExternalProject[] {
    const out: ReadExternalProject[] = [];
    const type = `${PROVIDER_NAME}_project`;
    const byType = this.section('data')[type];
    if (!isRecord(byType)) return out;
    for (const name of Object.keys(byType).sort()) {
      const n = this.node('data', type, name);
      if (!n) continue;
      try {
        const slug = this.attribute(n, 'slug');
        if (typeof slug === 'string') out.push({ name, constructPath: n.constructPath, slug });
        else this.problem(['data', type, name, 'slug'], `${n.constructPath}.slug`, 'slug is required');
      } catch {
        // reported where it failed
      }
    }
    return out;
  }

  private readResource(n: Node): ReadResource | undefined {
    const schema = this.schemaOf(n).attributes;
    let ok = true;
    const values: Record<string, JsonValue> = {};
    const fail = (attr: string, message: string) => {
      ok = false;
      this.problem(['resource', n.type, n.name, attr], `${n.constructPath}.${attr}`, message);
    };
    for (const attr of Object.keys(n.body)) {
      if (IGNORED_META.has(attr)) continue;
      if (META_ERRORS[attr]) {
        fail(attr, META_ERRORS[attr]);
        continue;
      }
      const a = schema[attr];
      if (!a) {
        fail(attr, `${n.type} has no attribute ${attr} (an override?)`);
        continue;
      }
      if (!a.optional && !a.required) {
        fail(attr, `${attr} is computed by the service and cannot be set`);
        continue;
      }
      try {
        const v = this.attribute(n, attr);
        if (v !== undefined && v !== null) values[attr] = v;
      } catch {
        ok = false; // reported where it failed
      }
    }
    for (const [attr, a] of Object.entries(schema)) {
      if (a.required && !(attr in values) && n.memo.get(attr)?.error === undefined) {
        fail(attr, `${attr} is required`);
      }
    }
    if (!ok) return undefined;
    this.checkParentReferences(n, values);
    return { type: n.type as KmsResourceType, name: n.name, constructPath: n.constructPath, values };
  }

  /**
   * Parent attributes may hold the id of the parent instead of its name (`${kms_template.gold.id}`):
   * turn those into the natural key the YAML format uses, and check they agree with project_env.
   */
  private checkParentReferences(n: Node, values: Record<string, JsonValue>): void {
    const m = RESOURCE_MAPPINGS[n.type as KmsResourceType];
    const projectEnv = typeof values.project_env === 'string' ? values.project_env : undefined;
    const refs: Array<[string, KmsResourceType]> = [];
    if ('client' in m.parents) refs.push(['client', 'kms_client']);
    if (n.type === 'kms_client') refs.push(['template', 'kms_template']);
    for (const [attr, parentType] of refs) {
      // The parent's id (`<project_env>/<name>`), written out or referenced, names the parent.
      const v = values[attr];
      if (projectEnv !== undefined && typeof v === 'string' && v.startsWith(`${projectEnv}/`))
        values[attr] = v.slice(projectEnv.length + 1);
      const raw = n.body[attr];
      const ref = typeof raw === 'string' ? /^\$\{([a-z_]+)\.([A-Za-z0-9_-]+)\.id\}$/.exec(raw) : null;
      if (!ref || ref[1] !== parentType) continue;
      const parent = this.node('resource', ref[1], ref[2]!);
      if (!parent) continue;
      try {
        const parentEnv = this.attribute(parent, 'project_env');
        const parentName = this.attribute(parent, 'name');
        if (typeof parentName === 'string') values[attr] = parentName;
        if (projectEnv !== undefined && parentEnv !== projectEnv) {
          this.problem(
            ['resource', n.type, n.name, attr],
            `${n.constructPath}.${attr}`,
            `${raw} is in environment ${String(parentEnv)}, not in ${projectEnv} (project_env of this ${n.type})`,
          );
        }
      } catch {
        // reported where it failed
      }
    }
    if (n.type === 'kms_environment' || projectEnv === undefined) return;
    if (!splitProjectEnv(projectEnv)) {
      this.problem(
        ['resource', n.type, n.name, 'project_env'],
        `${n.constructPath}.project_env`,
        `"${projectEnv}" is not an environment slug <project>-<type>`,
      );
    }
  }

  private readProviders(): ReadProvider[] {
    const block = isRecord(this.stack.json.provider) ? this.stack.json.provider[PROVIDER_NAME] : undefined;
    const configs = Array.isArray(block) ? block : isRecord(block) ? [block] : [];
    const schema = this.schema.provider.block;
    const out: ReadProvider[] = [];
    configs.forEach((cfg, i) => {
      if (!isRecord(cfg)) return;
      const label = `provider "${PROVIDER_NAME}"${typeof cfg.alias === 'string' ? ` (alias ${cfg.alias})` : ''}`;
      const at = (p: Array<string | number>) => ['provider', PROVIDER_NAME, i, ...p];
      const value = (raw: unknown, type: unknown, p: Array<string | number>): JsonValue | undefined => {
        try {
          return coerce(evaluateJson(raw, this.context()), type);
        } catch (e) {
          if (!(e instanceof DependentError))
            this.problem(at(p), `${label}.${p.join('.').replace(/\.(\d+)/g, '[$1]')}`, (e as Error).message);
          return undefined;
        }
      };
      const p: ReadProvider = { label, index: i, stores: [] };
      // url and api_key are Terraform's: kms-sync takes KMS_API_URL / KMS_API_KEY, so they are not read.
      for (const attr of ['owner', 'base_dir'] as const) {
        if (cfg[attr] === undefined || cfg[attr] === null) continue;
        const v = value(cfg[attr], schema.attributes[attr]!.type, [attr]);
        if (typeof v === 'string') p[attr === 'owner' ? 'owner' : 'baseDir'] = v;
      }
      const storeSchema = schema.block_types!.secret_store!.block.attributes;
      const stores = Array.isArray(cfg.secret_store)
        ? cfg.secret_store
        : isRecord(cfg.secret_store)
          ? [cfg.secret_store]
          : [];
      stores.forEach((s, j) => {
        if (!isRecord(s)) return;
        const store: Record<string, JsonValue> = {};
        for (const [k, raw] of Object.entries(s)) {
          const a = storeSchema[k];
          if (!a) {
            this.problem(
              at(['secret_store', j, k]),
              `${label}.secret_store[${j}].${k}`,
              `secret_store has no attribute ${k}`,
            );
            continue;
          }
          const v = value(raw, a.type, ['secret_store', j, k]);
          if (v !== undefined && v !== null) store[k] = v;
        }
        p.stores.push(store);
      });
      out.push(p);
    });
    return out;
  }
}
