// The tfplugin6.Provider RPCs: decode the DynamicValues against the schema, hand the objects to
// the resource type (resources/), encode the answer, and turn every failure into a diagnostic
// at the attribute it concerns. The resource types know the service; this file knows Terraform.
import { existsSync } from 'node:fs';
import path from 'node:path';
import { POLICY_HOW } from '../model/policy.js';
import { attributePath, DiagnosticError, Diagnostics, diagnosticsOf } from './diagnostics.js';
import type { ChangeAction, Engine, ProviderConfig } from './engine.js';
import type { ProviderImplementation } from './plugin/serve.js';
import { providerLog } from './log.js';
import { dataSourceTypes, ephemeralResourceTypes, resourceTypes } from './resources/index.js';
import { ImportIdError, known, PartialApplyError, type ResourceType } from './resources/types.js';
import { loadSchemas, protoSchema, valueType, writeOnlyAttributes, type ProviderSchemas } from './schema.js';
import { validateTimeouts, withTimeout } from './timeouts.js';
import { fromDynamic, decodeJson, jsonFitsType, toDynamic, type DynamicValue } from './values/codec.js';
import {
  containsUnknown,
  isUnknown,
  UNKNOWN,
  type CtyType,
  type JsonSchema,
  type TfObject,
  type TfValue,
} from './values/types.js';

export interface ProviderOptions {
  env: NodeJS.ProcessEnv;
  schemaFile?: string;
  /** Working directory of the run: the default base_dir (Terraform starts providers in the root module's). */
  cwd?: string;
}

// get_provider_schema_optional: Terraform starts the provider 3-4 times per command; with it, each start after
// the first takes the schema from Terraform's in-process cache instead of a GetProviderSchema call (no RPC
// depends on GetProviderSchema having been called).
const CAPABILITIES = { plan_destroy: true, get_provider_schema_optional: true, move_resource_state: false };

/** Deep equality of values; sets (and only sets) compare without order. */
export function sameValue(a: TfValue, b: TfValue, type: CtyType): boolean {
  if (a === null || b === null || isUnknown(a) || isUnknown(b)) return a === b;
  if (typeof type === 'string') {
    if (type === 'dynamic') return JSON.stringify(sortKeys(a)) === JSON.stringify(sortKeys(b));
    return a === b;
  }
  const [kind, arg] = type;
  if (kind === 'list' || kind === 'set' || kind === 'tuple') {
    if (!Array.isArray(a) || !Array.isArray(b) || a.length !== b.length) return false;
    if (kind === 'set') {
      const key = (x: TfValue) => JSON.stringify(sortKeys(x));
      const bs = b.map(key).sort();
      return a
        .map(key)
        .sort()
        .every((k, i) => k === bs[i]);
    }
    return a.every((x, i) => sameValue(x, b[i]!, kind === 'tuple' ? (arg as CtyType[])[i]! : (arg as CtyType)));
  }
  const ao = a as TfObject;
  const bo = b as TfObject;
  if (kind === 'map') {
    const keys = new Set([...Object.keys(ao), ...Object.keys(bo)]);
    return [...keys].every((k) => k in ao && k in bo && sameValue(ao[k]!, bo[k]!, arg as CtyType));
  }
  return Object.entries(arg as Record<string, CtyType>).every(([k, t]) => sameValue(ao[k] ?? null, bo[k] ?? null, t));
}

function sortKeys(v: TfValue): unknown {
  if (Array.isArray(v)) return v.map(sortKeys);
  if (v && typeof v === 'object')
    return Object.fromEntries(
      Object.keys(v)
        .sort()
        .map((k) => [k, sortKeys((v as TfObject)[k]!)]),
    );
  return v;
}

const computedAttributes = (s: JsonSchema) =>
  Object.entries(s.block.attributes ?? {})
    .filter(([, a]) => a.computed)
    .map(([n]) => n);

export function createProvider(opts: ProviderOptions): ProviderImplementation {
  const env = opts.env;
  const schemas: ProviderSchemas = loadSchemas(opts.schemaFile);
  const providerType = valueType(schemas.provider);
  let engine: Engine | undefined;
  /** The security changes were shown as warnings of a plan in this process. */
  let securityShown = false;
  /** Why the provider cannot talk to the service (set by ConfigureProvider). */
  let unconfigured = 'the provider was not configured (Terraform calls ConfigureProvider first)';
  let stopping = false;
  const log = providerLog(env);
  /** Identity of a state or plan for the log: its `id` (the import id), never another attribute. */
  const idOf = (o: TfObject | null | undefined) => (o && typeof o.id === 'string' ? o.id : undefined);

  interface ResourceEntry {
    rt: ResourceType;
    schema: JsonSchema;
    type: CtyType;
    /** Write-only attributes: null in every state and plan the provider answers (Terraform rejects anything else). */
    writeOnly: string[];
    computed: string[];
    state: (v: TfObject | null) => { msgpack: Buffer };
  }
  // Built once per resource type: every RPC of a plan looks its type up.
  const resourceEntries = new Map<string, ResourceEntry>();
  const resource = (name: string): ResourceEntry => {
    const cached = resourceEntries.get(name);
    if (cached) return cached;
    const rt = Object.hasOwn(resourceTypes, name) ? resourceTypes[name] : undefined;
    const schema = Object.hasOwn(schemas.resources, name) ? schemas.resources[name] : undefined;
    if (!rt || !schema)
      throw new DiagnosticError(
        `Unknown resource type ${name}`,
        `terraform-provider-kms knows ${Object.keys(resourceTypes).join(', ')}`,
      );
    const type = valueType(schema);
    const wo = writeOnlyAttributes(schema);
    const entry: ResourceEntry = {
      rt,
      schema,
      type,
      writeOnly: wo,
      computed: computedAttributes(schema),
      state: (v) => toDynamic(v && wo.length ? { ...v, ...Object.fromEntries(wo.map((a) => [a, null])) } : v, type),
    };
    resourceEntries.set(name, entry);
    return entry;
  };
  const ephemeral = (name: string) => {
    const er = ephemeralResourceTypes[name];
    const schema = schemas.ephemeralResources[name];
    if (!er || !schema)
      throw new DiagnosticError(
        `Unknown ephemeral resource type ${name}`,
        `terraform-provider-kms knows ${Object.keys(ephemeralResourceTypes).join(', ')}`,
      );
    return { er, type: valueType(schema) };
  };
  const needEngine = (): Engine => {
    if (!engine) throw new DiagnosticError('Provider not configured', unconfigured);
    if (stopping)
      throw new DiagnosticError('Stopping', 'Terraform asked the provider to stop; no further change is started');
    return engine;
  };
  /**
   * Terraform showed a state (the prior state of a read, plan or apply): it knows that object.
   * Only configured processes care (the key journal lives where the configuration says).
   */
  const seen = async (rt: ResourceType, state: TfObject | null) => {
    if (state && engine && rt.seen) await rt.seen(engine, state);
  };
  /**
   * The ownership rule for a planned change (model/ownership.ts, as `plan`): refused now, at plan
   * time, when the provider is configured (an apply checks again on fresh reads).
   */
  const guard = async (rt: ResourceType, prior: TfObject | null, planned: TfObject | null, action: ChangeAction) => {
    if (engine && !stopping && rt.guard) await rt.guard(engine, prior, planned, action);
  };
  /** Runs an RPC body; any failure becomes a diagnostic of the response. */
  const guarded =
    <R extends object>(body: (d: Diagnostics) => Promise<R>) =>
    async (): Promise<R | { diagnostics: unknown[] }> => {
      const d = new Diagnostics();
      try {
        const out = await body(d);
        return { ...out, diagnostics: d.list };
      } catch (e) {
        return { diagnostics: [...d.list, ...diagnosticsOf(e)] };
      }
    };

  const impl: ProviderImplementation = {
    GetMetadata: async () => ({
      server_capabilities: CAPABILITIES,
      diagnostics: [],
      resources: Object.keys(schemas.resources).map((type_name) => ({ type_name })),
      data_sources: Object.keys(schemas.dataSources).map((type_name) => ({ type_name })),
      ephemeral_resources: Object.keys(schemas.ephemeralResources).map((type_name) => ({ type_name })),
    }),

    GetProviderSchema: async () => ({
      provider: protoSchema(schemas.provider, 'provider'),
      resource_schemas: Object.fromEntries(Object.entries(schemas.resources).map(([n, s]) => [n, protoSchema(s, n)])),
      data_source_schemas: Object.fromEntries(
        Object.entries(schemas.dataSources).map(([n, s]) => [n, protoSchema(s, n)]),
      ),
      ephemeral_resource_schemas: Object.fromEntries(
        Object.entries(schemas.ephemeralResources).map(([n, s]) => [n, protoSchema(s, n)]),
      ),
      server_capabilities: CAPABILITIES,
      functions: {},
      diagnostics: [],
    }),

    GetFunctions: async () => ({ functions: {}, diagnostics: [] }),
    GetResourceIdentitySchemas: async () => ({ identity_schemas: {}, diagnostics: [] }),

    ValidateProviderConfig: (req: { config: DynamicValue }) =>
      guarded(async (d) => {
        const config = fromDynamic(req.config, providerType) as TfObject;
        validateProviderConfig(config, d);
        await checkStoreSchemes(config, d);
        return {};
      })(),

    ValidateResourceConfig: (req: {
      type_name: string;
      config: DynamicValue;
      client_capabilities?: { write_only_attributes_allowed?: boolean };
    }) =>
      guarded(async (d) => {
        const { rt, type, writeOnly } = resource(req.type_name);
        const config = fromDynamic(req.config, type) as TfObject;
        // A Terraform that does not know write-only attributes (< 1.11) would store their value in
        // the plan and state: refused, before anything is planned.
        if (!req.client_capabilities?.write_only_attributes_allowed) {
          for (const a of writeOnly) {
            if (config[a] !== null && config[a] !== undefined) {
              d.error(
                'Write-only attribute needs Terraform >= 1.11',
                `${a} is write-only: Terraform 1.11 and later (OpenTofu 1.11 and later) keep it out of plans and state; this one does not say it can, and would write the value there. Upgrade, or leave ${a} unset.`,
                [a],
              );
            }
          }
        }
        rt.validate(config, d);
        validateTimeouts(config, d);
        return {};
      })(),

    ValidateDataResourceConfig: (req: { type_name: string; config: DynamicValue }) =>
      guarded(async (d) => {
        const ds = dataSourceTypes[req.type_name];
        const schema = schemas.dataSources[req.type_name];
        if (!ds || !schema) throw new DiagnosticError(`Unknown data source ${req.type_name}`);
        ds.validate(fromDynamic(req.config, valueType(schema)) as TfObject, d);
        return {};
      })(),

    UpgradeResourceState: (req: {
      type_name: string;
      version: number;
      raw_state: { json?: Buffer; flatmap?: Record<string, string> };
    }) =>
      guarded(async () => {
        const { schema, type, state, writeOnly } = resource(req.type_name);
        if (req.version > (schema.version ?? 0)) {
          throw new DiagnosticError(
            'State written by a newer provider',
            `${req.type_name} state has schema version ${req.version}; this provider knows version ${schema.version ?? 0}: upgrade terraform-provider-kms`,
          );
        }
        if (!req.raw_state?.json?.length)
          throw new DiagnosticError(
            'State has no JSON form',
            `${req.type_name}: only JSON state (Terraform >= 0.12) can be read`,
          );
        // State of today's version whose JSON is exactly today's type, write-only attributes null
        // (every state this provider wrote): Terraform reads the same bytes back, nothing to convert.
        const raw: unknown = JSON.parse(Buffer.from(req.raw_state.json).toString('utf8'));
        if (
          req.version === (schema.version ?? 0) &&
          raw !== null &&
          jsonFitsType(raw, type) &&
          writeOnly.every((a) => (raw as TfObject)[a] === null)
        )
          return { upgraded_state: { json: req.raw_state.json } };
        // Version 0 is the only one so far: the JSON is read against today's type (attributes that
        // no longer exist are dropped, new ones start null).
        return { upgraded_state: state(decodeJson(req.raw_state.json, type) as TfObject | null) };
      })(),

    ConfigureProvider: (req: { config: DynamicValue }) =>
      guarded(async (d) => {
        const config = fromDynamic(req.config, providerType) as TfObject;
        validateProviderConfig(config, d);
        await checkStoreSchemes(config, d);
        if (d.hasErrors) return {};
        const resolved = await resolveProviderConfig(config, env, opts.cwd ?? process.cwd(), d);
        if (!resolved) {
          unconfigured =
            d.list.map((x) => x.detail || x.summary).join('; ') || 'the provider configuration is not known yet';
          return {};
        }
        const { Engine } = await import('./engine.js');
        await engine?.close();
        engine = new Engine(resolved, env);
        log.log('debug', 'provider configured', {
          owner: resolved.owner,
          stores: resolved.stores.length,
          take_ownership: resolved.takeOwnership === true,
        });
        return {};
      })(),

    PlanResourceChange: (req: {
      type_name: string;
      prior_state: DynamicValue;
      proposed_new_state: DynamicValue;
      config: DynamicValue;
    }) =>
      guarded(async (d) => {
        const { rt, type, state, computed } = resource(req.type_name);
        const prior = fromDynamic(req.prior_state, type) as TfObject | null;
        const proposed = fromDynamic(req.proposed_new_state, type) as TfObject | null;
        const config = fromDynamic(req.config, type) as TfObject | null;
        log.log('trace', `PlanResourceChange ${req.type_name}`, { resource: req.type_name, id: idOf(prior) });
        await seen(rt, prior);
        // Terraform's plan has no section for them: the provider block's security changes are warnings of the first plan (once per process).
        if (engine && !securityShown) {
          securityShown = true;
          const lines = await engine.securityChanges();
          // One warning: Terraform folds warnings of one summary into the first one's detail.
          if (lines.length)
            d.warning(
              `Security changes (${lines.length}): the secret stores of the provider block`,
              `Review who can read the keys and where store credentials go:\n${lines.map((l) => `- ${l}`).join('\n')}`,
            );
        }
        if (proposed === null) {
          if (prior?.protected === true) {
            d.error(
              'Protected resource',
              `${req.type_name} ${String(prior.id)} is protected: kms-sync never deletes or replaces it. Set protected = false first, or remove it from state with terraform state rm.`,
              ['protected'],
            );
          }
          if (prior) await guard(rt, prior, null, 'delete');
          // The deletion guard counts what this plan deletes (a replacement is not a delete).
          if (prior && engine && !stopping) engine.deletions.countDelete(`${req.type_name}.${String(prior.id)}`);
          return { planned_state: state(null), requires_replace: [] };
        }
        const attrs = (type as ['object', Record<string, CtyType>])[1];
        let planned: TfObject = { ...proposed };
        const unknownComputed = () => {
          for (const a of computed) if (config?.[a] === null || config?.[a] === undefined) planned[a] = UNKNOWN;
          planned = { ...planned, ...rt.planKnown?.(planned) };
        };
        if (prior === null) {
          unknownComputed();
          await guard(rt, null, planned, 'create');
          return { planned_state: state(planned), requires_replace: [] };
        }
        const replace = rt.replaceOn.filter(
          (a) =>
            !sameValue(prior[a] ?? null, planned[a] ?? null, attrs[a]!) &&
            !(engine && rt.sameTarget?.(a, prior[a] ?? null, planned[a] ?? null, engine.config)),
        );
        if (rt.planExtra) {
          const extra = rt.planExtra(prior, planned, config ?? {}, new Date());
          planned = extra.planned;
          for (const a of extra.replace) if (!replace.includes(a)) replace.push(a);
        }
        if (replace.length) {
          if (prior.protected === true) {
            d.error(
              'Protected resource',
              `${req.type_name} ${String(prior.id)} is protected and this change (${replace.join(', ')}) would replace it. Set protected = false first.`,
              [replace[0]!],
            );
          }
          unknownComputed();
          await guard(rt, prior, planned, 'replace');
        } else if (!onlyTimeoutsDiffer(attrs, prior, planned)) {
          for (const a of rt.changeOnUpdate ?? []) planned[a] = UNKNOWN;
          await guard(rt, prior, planned, 'update');
        }
        return { planned_state: state(planned), requires_replace: replace.map((a) => attributePath([a])) };
      })(),

    ApplyResourceChange: (req: {
      type_name: string;
      prior_state: DynamicValue;
      planned_state: DynamicValue;
      config?: DynamicValue;
    }) =>
      guarded(async (d) => {
        const { rt, type, state } = resource(req.type_name);
        const prior = fromDynamic(req.prior_state, type) as TfObject | null;
        const planned = fromDynamic(req.planned_state, type) as TfObject | null;
        const config = (req.config ? fromDynamic(req.config, type) : null) as TfObject | null;
        const e = needEngine();
        await seen(rt, prior);
        const started = Date.now();
        const action = planned === null ? 'delete' : prior === null ? 'create' : 'update';
        log.log('debug', `ApplyResourceChange ${req.type_name} ${action}`, {
          resource: req.type_name,
          id: idOf(prior ?? planned),
          action,
        });
        if (planned === null) {
          await withTimeout(req.type_name, 'delete', prior, () => rt.delete(e, prior!, d));
          log.log('info', `${req.type_name} deleted`, {
            resource: req.type_name,
            id: idOf(prior),
            ms: Date.now() - started,
          });
          return { new_state: state(null) };
        }
        // A changed timeouts block only: the state takes it, the service is not asked.
        if (prior !== null && onlyTimeoutsDiffer((type as ['object', Record<string, CtyType>])[1], prior, planned))
          return { new_state: state(planned) };
        try {
          const after =
            prior === null
              ? await withTimeout(req.type_name, 'create', planned, () => rt.create(e, planned, d, config ?? undefined))
              : await withTimeout(req.type_name, 'update', planned, () =>
                  rt.update(e, prior, planned, config ?? undefined),
                );
          log.log('info', `${req.type_name} ${action === 'create' ? 'created' : 'updated'}`, {
            resource: req.type_name,
            id: idOf(after),
            ms: Date.now() - started,
          });
          return { new_state: state(consistentWith(planned, after)) };
        } catch (err) {
          // The object exists but the change did not fully succeed: Terraform keeps it (tainted) with the error.
          if (!(err instanceof PartialApplyError)) throw err;
          d.error(err.summary, err.message);
          return { new_state: state(consistentWith(planned, err.state)) };
        }
      })(),

    ReadResource: (req: { type_name: string; current_state: DynamicValue; private: Buffer }) =>
      guarded(async (d) => {
        const { rt, type, state } = resource(req.type_name);
        const current = fromDynamic(req.current_state, type) as TfObject | null;
        if (current === null) return { new_state: state(null), private: req.private };
        await seen(rt, current);
        const live = await withTimeout(req.type_name, 'read', current, () => rt.read(needEngine(), current, false, d));
        log.log('trace', `ReadResource ${req.type_name}${live ? '' : ': gone'}`, {
          resource: req.type_name,
          id: idOf(current),
        });
        return { new_state: state(live), private: req.private };
      })(),

    ImportResourceState: (req: { type_name: string; id: string }) =>
      guarded(async () => {
        const { rt, type, state: stateOf } = resource(req.type_name);
        let identity: TfObject;
        try {
          identity = rt.parseImportId(req.id);
        } catch (e) {
          if (e instanceof ImportIdError) throw new DiagnosticError('Invalid import id', e.message);
          throw e;
        }
        const blank = Object.fromEntries(
          Object.keys((type as ['object', Record<string, CtyType>])[1]).map((k) => [k, null]),
        ) as TfObject;
        const state = await rt.read(needEngine(), { ...blank, ...identity }, true);
        if (!state)
          throw new DiagnosticError(
            'Cannot import non-existent remote object',
            `${req.type_name} ${JSON.stringify(req.id)} does not exist in the service`,
          );
        return { imported_resources: [{ type_name: req.type_name, state: stateOf(state), private: Buffer.alloc(0) }] };
      })(),

    ReadDataSource: (req: { type_name: string; config: DynamicValue }) =>
      guarded(async () => {
        const ds = dataSourceTypes[req.type_name];
        const schema = schemas.dataSources[req.type_name];
        if (!ds || !schema) throw new DiagnosticError(`Unknown data source ${req.type_name}`);
        const type = valueType(schema);
        return { state: toDynamic(await ds.read(needEngine(), fromDynamic(req.config, type) as TfObject), type) };
      })(),

    ValidateEphemeralResourceConfig: (req: { type_name: string; config: DynamicValue }) =>
      guarded(async (d) => {
        const { er, type } = ephemeral(req.type_name);
        er.validate(fromDynamic(req.config, type) as TfObject, d);
        return {};
      })(),

    /** Terraform opens an ephemeral resource (plan and apply) once its configuration is wholly known; the result lives in its memory only. */
    OpenEphemeralResource: (req: { type_name: string; config: DynamicValue }) =>
      guarded(async () => {
        const { er, type } = ephemeral(req.type_name);
        const config = fromDynamic(req.config, type) as TfObject;
        const result = await er.open(needEngine(), config);
        log.log('debug', `OpenEphemeralResource ${req.type_name}`, {
          resource: req.type_name,
          id: typeof result.key_id === 'string' ? result.key_id : undefined,
        });
        return { result: toDynamic(result, type) };
      })(),

    // No result asks for renewal (no renew_at) and nothing is held open between the calls: a raw
    // key is not a lease. Both answer, for a Terraform that calls them anyway.
    RenewEphemeralResource: async () => ({ diagnostics: [] }),
    CloseEphemeralResource: async () => ({ diagnostics: [] }),

    /** Not an RPC (serve.ts registers only the service's methods): the journal writes in flight, awaited before exiting. */
    drain: async (ms: number) => {
      await engine?.drain(ms);
      return {};
    },

    StopProvider: async () => {
      // Graceful: no new change starts; a change in flight (a key on its way to its store) finishes.
      stopping = true;
      return { Error: '' };
    },
  };
  return impl;
}

/** Nothing but the timeouts block (Terraform's, kept in the state only) differs between the two objects. */
function onlyTimeoutsDiffer(attrs: Record<string, CtyType>, a: TfObject, b: TfObject): boolean {
  return Object.keys(attrs).every((k) => k === 'timeouts' || sameValue(a[k] ?? null, b[k] ?? null, attrs[k]!));
}

/** Known planned values win over what the service echoes (Terraform rejects an apply that changes them). */
function consistentWith(planned: TfObject, after: TfObject): TfObject {
  const out: TfObject = { ...after };
  for (const [k, v] of Object.entries(out)) if (containsUnknown(v)) out[k] = null;
  for (const [k, v] of Object.entries(planned)) if (v !== null && !containsUnknown(v)) out[k] = v;
  return out;
}

// ---------------------------------------------------------------- provider configuration
const STORE_NAME = /^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/;

function validateProviderConfig(config: TfObject, d: Diagnostics): void {
  const url = config.url;
  if (typeof url === 'string') {
    try {
      new URL(url);
    } catch {
      d.error('Invalid url', `${JSON.stringify(url)} is not a URL, e.g. https://kms.example.com/api/v1`, ['url']);
    }
  }
  const stores = Array.isArray(config.secret_store) ? (config.secret_store as TfObject[]) : [];
  const seen = new Map<string, number>();
  let defaults = 0;
  stores.forEach((s, i) => {
    if (typeof s.name === 'string') {
      if (!STORE_NAME.test(s.name))
        d.error('Invalid store name', `${JSON.stringify(s.name)}: use letters, digits, '.', '_' or '-' (at most 64)`, [
          'secret_store',
          i,
          'name',
        ]);
      if (seen.has(s.name))
        d.error(
          'Duplicate store name',
          `secret_store "${s.name}" is declared twice (blocks ${seen.get(s.name)} and ${i})`,
          ['secret_store', i, 'name'],
        );
      seen.set(s.name, i);
    }
    if (typeof s.uri === 'string' && !/^[A-Za-z][A-Za-z0-9+.-]*:/.test(s.uri)) {
      d.error(
        'Invalid store uri',
        `${JSON.stringify(s.uri)} has no scheme, e.g. file:./secrets.sops.yaml or vault://host:8200/secret/kms`,
        ['secret_store', i, 'uri'],
      );
    }
    if (s.default === true && ++defaults > 1)
      d.error('Two default stores', 'at most one secret_store block sets default = true', [
        'secret_store',
        i,
        'default',
      ]);
    if (known(s.options) && (typeof s.options !== 'object' || Array.isArray(s.options)))
      d.error('Invalid store options', 'options must be an object', ['secret_store', i, 'options']);
  });
}

/**
 * A store URI of a scheme no backend serves fails at validate (every plan), not at the first key
 * of an apply. The table of backends is read only when a secret_store block is declared; no
 * backend is loaded.
 */
async function checkStoreSchemes(config: TfObject, d: Diagnostics): Promise<void> {
  const stores = Array.isArray(config.secret_store) ? (config.secret_store as TfObject[]) : [];
  const uris = stores
    .map((s, i) => [s.uri, i] as const)
    .filter((x): x is readonly [string, number] => typeof x[0] === 'string' && /^[A-Za-z][A-Za-z0-9+.-]*:/.test(x[0]));
  if (uris.length === 0) return;
  const { supportedStoreSchemes } = await import('../secrets/registry.js');
  const supported = supportedStoreSchemes();
  for (const [uri, i] of uris) {
    const scheme = `${uri.slice(0, uri.indexOf(':')).toLowerCase()}:`;
    if (!supported.includes(scheme))
      d.error(
        'Unknown store scheme',
        `secret_store ${i}: '${scheme}' is not a store kms-sync knows; supported: ${supported.join(', ')}`,
        ['secret_store', i, 'uri'],
      );
  }
}

/**
 * Where the key store and journal go when `base_dir` is not set: the directory Terraform runs in,
 * except under CDKTF. `cdktf deploy` runs Terraform in `cdktf.out/stacks/<stack>`, a generated,
 * git-ignored folder that people delete; keys kept there are lost with it. So when the working
 * directory is a stack of a synth output that sits beside its app's `cdktf.json`, the app's folder
 * is the default: the same place `kms-sync --cdktf` keeps them, so both share one store and journal.
 */
export function defaultBaseDir(cwd: string): string {
  const stacks = path.dirname(cwd);
  const outdir = path.dirname(stacks);
  const app = path.dirname(outdir);
  if (
    path.basename(stacks) === 'stacks' &&
    existsSync(path.join(outdir, 'manifest.json')) &&
    existsSync(path.join(app, 'cdktf.json'))
  )
    return app;
  return cwd;
}

async function resolveProviderConfig(
  config: TfObject,
  env: NodeJS.ProcessEnv,
  cwd: string,
  d: Diagnostics,
): Promise<ProviderConfig | undefined> {
  if (
    [config.url, config.api_key, config.owner, config.base_dir, config.take_ownership].some(isUnknown) ||
    containsUnknown(config.secret_store ?? null)
  ) {
    d.warning(
      'Provider configuration not known yet',
      'url, api_key, owner, base_dir, take_ownership or a secret_store depends on a value known only after apply; kms resources cannot be planned until it is known',
    );
    return undefined;
  }
  const url = (config.url as string | null) ?? env.KMS_API_URL;
  const apiKey = (config.api_key as string | null) ?? env.KMS_API_KEY;
  if (!url)
    d.error(
      'Missing service URL',
      'set url in the provider block or the KMS_API_URL environment variable, e.g. https://kms.example.com/api/v1',
      ['url'],
    );
  else if (config.url === null) {
    try {
      new URL(url);
    } catch {
      d.error('Invalid KMS_API_URL', `${JSON.stringify(url)} is not a URL`, ['url']);
    }
  }
  // KMS_API_KEY in terraform's environment is the operator's; the provider block is configuration a
  // pull request edits. So the block's url never chooses where that key goes: with the key from the
  // environment the service is the one KMS_API_URL names, and a url naming another is refused
  // before any request (as `kms-sync apply PLANFILE` only checks a saved plan's URL).
  if (typeof config.url === 'string' && config.api_key == null && apiKey) {
    const { serviceTarget } = await import('../model/target.js');
    const service = (u: string) => serviceTarget(u, 'unknown', {}).replace(/#unknown$/, '');
    if (!env.KMS_API_URL || service(config.url) !== service(env.KMS_API_URL))
      d.error(
        'Service URL not allowed',
        `url in the provider block names ${service(config.url)}, but the project key comes from KMS_API_KEY in terraform's environment, ` +
          `which goes only to the service KMS_API_URL names (${env.KMS_API_URL ? service(env.KMS_API_URL) : 'not set'}): the provider block is configuration a pull request can edit. ` +
          'Set KMS_API_URL to that service (url may then stay, naming the same one) or remove url; or give the block its own api_key (a sensitive variable)',
        ['url'],
      );
  }
  if (!apiKey)
    d.error(
      'Missing project key',
      'set the KMS_API_KEY environment variable (or api_key from a sensitive variable) to a project key sk_live_… or sk_test_…',
      ['api_key'],
    );
  if (d.hasErrors || !url || !apiKey) return undefined;
  const stores = ((config.secret_store as TfObject[] | null) ?? []).map((s) => ({
    name: s.name as string,
    uri: s.uri as string,
    ...(s.default === true ? { default: true } : {}),
    ...(s.options && typeof s.options === 'object' ? { options: s.options as never } : {}),
  }));
  const baseDir = typeof config.base_dir === 'string' ? path.resolve(cwd, config.base_dir) : defaultBaseDir(cwd);
  // The same rule as the CLI's: declared, else derived — and a derived id that moved since this
  // configuration last applied stops the run (model/owner.ts).
  // The operator policy comes from the environment (KMS_SYNC_POLICY, KMS_SYNC_*): the provider
  // block is part of the configuration a pull request edits, so it cannot widen what stores reach.
  const [{ readOperatorPolicy, PolicyError }, { storePolicyProblems, isInside, realpathOfPrefix }] = await Promise.all([
    import('../config/policy.js'),
    import('../secrets/store-policy.js'),
  ]);
  let policy;
  try {
    policy = readOperatorPolicy({ env, configRoot: baseDir, policyFlagName: 'KMS_SYNC_POLICY' });
  } catch (e) {
    if (!(e instanceof PolicyError)) throw e;
    d.error('Operator policy', e.message, []);
    return undefined;
  }
  // base_dir is the block's, so the folder store files must stay in is the one terraform runs in
  // (under cdktf deploy, the app's): a base_dir out of it moves every store file, the journal and
  // the records with it, and needs the same policy setting as a store file out of it.
  const root = defaultBaseDir(cwd);
  if (!policy.storesOutsideRoot && !isInside(realpathOfPrefix(baseDir), realpathOfPrefix(root)))
    d.error(
      'Store folder refused by the operator policy',
      `base_dir ${JSON.stringify(config.base_dir)} resolves outside the folder terraform runs in (its stores, journal and records would go there), and the operator policy keeps store files inside it; allow it with ${POLICY_HOW.storesOutsideRoot}`,
      ['base_dir'],
    );
  stores.forEach((s, i) => {
    for (const problem of storePolicyProblems(s, policy, baseDir))
      d.error('Store refused by the operator policy', problem.message, [
        'secret_store',
        i,
        problem.field.split('.')[0]!,
      ]);
  });
  if (d.hasErrors) return undefined;
  const { resolveOwnerId, OwnerMovedError } = await import('../model/owner.js');
  try {
    const { owner } = await resolveOwnerId(typeof config.owner === 'string' ? config.owner : undefined, baseDir);
    return {
      url,
      apiKey,
      baseDir,
      stores,
      owner,
      policy,
      ...(config.take_ownership === true ? { takeOwnership: true } : {}),
    };
  } catch (e) {
    if (!(e instanceof OwnerMovedError)) throw e;
    d.error('Owner id moved', e.message, ['owner']);
    return undefined;
  }
}
