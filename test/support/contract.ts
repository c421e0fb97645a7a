// Contract helpers: load schemas/kms-api.openapi.yaml and check responses against it with ajv.
//
// OpenAPI 3.0 schemas are not quite JSON Schema: `nullable` is converted to a `null` type,
// OpenAPI-only keywords are dropped, and `#/components/schemas/X` refs are resolved by
// registering every component schema with ajv under one document id.
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { Ajv, type ErrorObject, type ValidateFunction } from 'ajv';
import * as ajvFormatsModule from 'ajv-formats';
import { parse as parseYaml } from 'yaml';

type Json = unknown;
type Obj = Record<string, unknown>;

export interface ResponseObject {
  description?: string;
  headers?: Record<string, { $ref?: string; required?: boolean; schema?: Obj; description?: string }>;
  content?: Record<string, { schema?: Obj }>;
  $ref?: string;
}
export interface OperationObject {
  operationId?: string;
  summary?: string;
  description?: string;
  security?: Array<Record<string, string[]>>;
  parameters?: Obj[];
  requestBody?: Obj;
  responses: Record<string, ResponseObject>;
}
export interface OpenApiDocument {
  openapi: string;
  info: Obj;
  servers?: Array<{ url: string }>;
  security?: Array<Record<string, string[]>>;
  paths: Record<string, Record<string, OperationObject | Obj[] | string>>;
  components: {
    schemas: Record<string, Obj>;
    responses: Record<string, ResponseObject>;
    parameters: Record<string, Obj>;
    headers: Record<string, Obj>;
    securitySchemes: Record<string, Obj>;
  };
}

export const HTTP_METHODS = ['get', 'put', 'post', 'delete', 'options', 'head', 'patch', 'trace'] as const;

export const CONTRACT_FILE = fileURLToPath(new URL('../../schemas/kms-api.openapi.yaml', import.meta.url));

/** Loads (a fresh copy of) the contract document. */
export function loadContract(): OpenApiDocument {
  return parseYaml(readFileSync(CONTRACT_FILE, 'utf8')) as OpenApiDocument;
}

export const contract: OpenApiDocument = loadContract();

/** The server base path of the contract, e.g. `/api/v1`. */
export const basePath: string = (contract.servers?.[0]?.url ?? '').replace(/\/+$/, '');

// ------------------------------------------------------------------ OpenAPI 3.0 → JSON Schema
const DOC_ID = 'kms-openapi';
const DROP = new Set(['example', 'externalDocs', 'xml', 'discriminator']);

/** Converts one OpenAPI 3.0 schema object to a JSON Schema (draft-07) that ajv accepts. */
export function toJsonSchema(schema: Json): Json {
  if (Array.isArray(schema)) return schema.map(toJsonSchema);
  if (!schema || typeof schema !== 'object') return schema;
  const src = schema as Obj;
  if (typeof src.$ref === 'string') {
    const m = /^#\/components\/schemas\/(.+)$/.exec(src.$ref);
    if (!m) throw new Error(`contract: unsupported $ref ${src.$ref}`);
    return { $ref: `${DOC_ID}#/definitions/${m[1]}` };
  }
  const out: Obj = {};
  for (const [k, v] of Object.entries(src)) {
    if (DROP.has(k) || k.startsWith('x-') || k === 'nullable') continue;
    if (k === 'properties' && v && typeof v === 'object') {
      out[k] = Object.fromEntries(Object.entries(v as Obj).map(([name, s]) => [name, toJsonSchema(s)]));
    } else if (['items', 'not', 'additionalProperties'].includes(k) && v && typeof v === 'object') {
      out[k] = toJsonSchema(v);
    } else if (['allOf', 'anyOf', 'oneOf'].includes(k) && Array.isArray(v)) {
      out[k] = v.map(toJsonSchema);
    } else {
      out[k] = v;
    }
  }
  if (src.nullable === true) {
    if (typeof out.type === 'string') {
      out.type = [out.type, 'null'];
      if (Array.isArray(out.enum) && !out.enum.includes(null)) out.enum = [...out.enum, null];
    } else {
      return { anyOf: [out, { type: 'null' }] };
    }
  }
  return out;
}

function createAjv(): Ajv {
  const ajv = new Ajv({
    allErrors: true,
    strict: true,
    strictTypes: false,
    strictTuples: false,
    strictRequired: false,
  });
  // ajv-formats is CommonJS: its default export arrives as module.exports (or .default of it).
  const mod = ajvFormatsModule as unknown as { default: unknown };
  const plugin = ((mod.default as { default?: unknown }).default ?? mod.default) as (a: Ajv) => Ajv;
  plugin(ajv);
  const definitions = Object.fromEntries(
    Object.entries(contract.components.schemas).map(([name, s]) => [name, toJsonSchema(s)]),
  );
  ajv.addSchema({ $id: DOC_ID, definitions });
  return ajv;
}

const ajv = createAjv();
const validators = new Map<string, ValidateFunction>();

// ------------------------------------------------------------------ lookups
function deref<T extends { $ref?: string }>(obj: T, section: 'responses' | 'headers' | 'parameters'): T {
  if (!obj.$ref) return obj;
  const m = new RegExp(`^#/components/${section}/(.+)$`).exec(obj.$ref);
  const target = m ? (contract.components[section] as Record<string, unknown>)[m[1]!] : undefined;
  if (!target) throw new Error(`contract: unresolvable $ref ${obj.$ref}`);
  return target as T;
}

/** Every operation of the document as [method (upper-case), path template, operation]. */
export function listOperations(doc: OpenApiDocument = contract): Array<[string, string, OperationObject]> {
  const ops: Array<[string, string, OperationObject]> = [];
  for (const [path, item] of Object.entries(doc.paths)) {
    for (const m of HTTP_METHODS) {
      const op = item[m];
      if (op && typeof op === 'object' && !Array.isArray(op)) ops.push([m.toUpperCase(), path, op as OperationObject]);
    }
  }
  return ops;
}

export function getOperation(method: string, pathTemplate: string): OperationObject | undefined {
  const op = contract.paths[pathTemplate]?.[method.toLowerCase()];
  return op && typeof op === 'object' && !Array.isArray(op) ? (op as OperationObject) : undefined;
}

/**
 * Matches a concrete request path (with or without the `/api/v1` base, query or host) to the
 * contract's path template. Literal segments win over `{param}` segments, position by position,
 * so `/client/templates` matches `/client/templates`, not `/client/{client_uuid}`.
 */
export function matchPathTemplate(concretePath: string): string | undefined {
  let p = concretePath;
  if (/^https?:\/\//.test(p)) p = new URL(p).pathname;
  p = p.split(/[?#]/)[0] ?? '';
  if (basePath && (p === basePath || p.startsWith(`${basePath}/`))) p = p.slice(basePath.length);
  if (p.length > 1) p = p.replace(/\/+$/, '');
  const segs = p.split('/');
  let best: { template: string; score: number[] } | undefined;
  for (const template of Object.keys(contract.paths)) {
    const tsegs = template.split('/');
    if (tsegs.length !== segs.length) continue;
    const score: number[] = [];
    let ok = true;
    for (let i = 0; i < tsegs.length; i++) {
      const t = tsegs[i]!;
      const s = segs[i]!;
      if (/^\{[^}]+\}$/.test(t)) {
        if (s === '') {
          ok = false;
          break;
        }
        score.push(0);
      } else if (t === s) {
        score.push(1);
      } else {
        ok = false;
        break;
      }
    }
    if (!ok) continue;
    if (!best || compareScores(score, best.score) > 0) best = { template, score };
  }
  return best?.template;
}

function compareScores(a: number[], b: number[]): number {
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return (a[i] ?? 0) - (b[i] ?? 0);
  return 0;
}

/**
 * The documented response for method/path/status. For a path that exists without this method
 * the contract's MethodNotAllowed (405) applies; for a path that is not in the contract,
 * its NotFound (404). Anything else undocumented throws.
 */
export function documentedResponse(
  method: string,
  pathTemplate: string,
  status: number,
): { response: ResponseObject; where: string } {
  const template = contract.paths[pathTemplate] ? pathTemplate : matchPathTemplate(pathTemplate);
  const M = method.toUpperCase();
  if (!template) {
    if (status === 404)
      return {
        response: deref({ $ref: '#/components/responses/NotFound' }, 'responses'),
        where: `unknown route ${M} ${pathTemplate} → 404`,
      };
    throw new Error(`contract: path ${pathTemplate} is not documented (status ${status})`);
  }
  const op = getOperation(M, template);
  if (!op) {
    if (status === 405)
      return {
        response: deref({ $ref: '#/components/responses/MethodNotAllowed' }, 'responses'),
        where: `${M} ${template} → 405`,
      };
    throw new Error(`contract: operation ${M} ${template} is not documented (status ${status})`);
  }
  const raw = op.responses[String(status)] ?? op.responses[`${String(status)[0]}XX`] ?? op.responses.default;
  if (!raw) {
    throw new Error(
      `contract: status ${status} of ${M} ${template} is not documented (documented: ${Object.keys(op.responses).join(', ')})`,
    );
  }
  return { response: deref(raw, 'responses'), where: `${M} ${template} → ${status}` };
}

function redact(text: string): string {
  return text.replace(/kmsc_[A-Za-z0-9_-]{8,}/g, 'kmsc_<redacted>');
}

function describeErrors(errors: ErrorObject[] | null | undefined): string {
  return (errors ?? [])
    .map(
      (e) =>
        `  body${e.instancePath.replace(/\//g, '.')} ${e.message ?? ''}${e.params ? ` ${JSON.stringify(e.params)}` : ''}`,
    )
    .join('\n');
}

type HeaderSource = Headers | Record<string, string | string[] | undefined>;

function headerValue(headers: HeaderSource, name: string): string | undefined {
  if (typeof (headers as Headers).get === 'function') return (headers as Headers).get(name) ?? undefined;
  const rec = headers as Record<string, string | string[] | undefined>;
  const key = Object.keys(rec).find((k) => k.toLowerCase() === name.toLowerCase());
  const v = key === undefined ? undefined : rec[key];
  return Array.isArray(v) ? v.join(', ') : v;
}

/**
 * Validates a response body (and, when given, the response headers the contract marks required)
 * against the contract. Throws an Error with ajv's messages on mismatch, and throws when the
 * operation or the status is not documented.
 */
export function assertMatchesContract(
  method: string,
  pathTemplate: string,
  status: number,
  body: unknown,
  headers?: HeaderSource,
): void {
  const { response, where } = documentedResponse(method, pathTemplate, status);
  const problems: string[] = [];

  if (headers) {
    for (const [name, h] of Object.entries(response.headers ?? {})) {
      const header = deref(h, 'headers');
      const value = headerValue(headers, name);
      if (value === undefined) {
        if (header.required) problems.push(`  missing required header ${name}`);
        continue;
      }
      const type = header.schema?.type;
      if (type === 'integer' && !/^\d+$/.test(value))
        problems.push(`  header ${name} must be an integer, got ${JSON.stringify(value)}`);
    }
  }

  const content = response.content ?? {};
  const mediaTypes = Object.keys(content);
  if (mediaTypes.length === 0) {
    if (body !== undefined && body !== null && body !== '')
      problems.push('  the contract documents no body, but one was returned');
  } else {
    const mt = content['application/json'] ? 'application/json' : mediaTypes[0]!;
    const schema = content[mt]?.schema;
    if (schema) {
      const key = `${where}|${mt}`;
      let validate = validators.get(key);
      if (!validate) {
        validate = ajv.compile(toJsonSchema(schema) as object);
        validators.set(key, validate);
      }
      if (!validate(body)) problems.push(describeErrors(validate.errors));
    }
  }

  if (problems.length > 0) {
    let excerpt: string;
    try {
      excerpt = redact(JSON.stringify(body)).slice(0, 600);
    } catch {
      excerpt = String(body).slice(0, 600);
    }
    throw new Error(`response of ${where} does not match the contract:\n${problems.join('\n')}\nbody: ${excerpt}`);
  }
}
