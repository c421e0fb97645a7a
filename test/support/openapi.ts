// Checks HTTP requests (and the fake's own responses) against a published OpenAPI 3.0 description,
// trimmed to the routes a test uses: path template, path and query parameters with their schemas,
// the JSON request body, and the response body of the status sent.
import { Ajv, type ValidateFunction } from 'ajv';
import addFormatsModule from 'ajv-formats';

const addFormats = addFormatsModule as unknown as (a: Ajv, o?: unknown) => Ajv;

type Json = any;

/** The description with only the given operations and every component they reach. */
export function trimOpenApi(doc: Json, routes: { path: string; method: string }[]): Json {
  const out: Json = { openapi: doc.openapi, info: doc.info, paths: {}, components: {} };
  for (const r of routes) {
    const item = doc.paths[r.path];
    if (!item?.[r.method]) throw new Error(`the description has no ${r.method.toUpperCase()} ${r.path}`);
    out.paths[r.path] ??= item.parameters ? { parameters: item.parameters } : {};
    out.paths[r.path][r.method] = item[r.method];
  }
  const seen = new Set<string>();
  const visit = (node: Json) => {
    if (Array.isArray(node)) return node.forEach(visit);
    if (!node || typeof node !== 'object') return;
    for (const [k, v] of Object.entries(node)) {
      if (k === '$ref' && typeof v === 'string' && v.startsWith('#/components/') && !seen.has(v)) {
        seen.add(v);
        const [, , section, name] = v.split('/') as [string, string, string, string];
        const target = doc.components[section]?.[name];
        if (target === undefined) throw new Error(`dangling reference ${v}`);
        (out.components[section] ??= {})[name] = target;
        visit(target);
      } else visit(v);
    }
  };
  visit(out.paths);
  return out;
}

const pointer = (...parts: string[]) => '#/' + parts.map((p) => p.replace(/~/g, '~0').replace(/\//g, '~1')).join('/');

interface Operation {
  method: string;
  template: string;
  pattern: RegExp;
  names: string[];
  op: Json;
}

export interface CheckedRequest {
  method: string;
  template: string;
  params: Record<string, string>;
  query: URLSearchParams;
  body: unknown;
}

export class OpenApiChecker {
  private readonly ajv: Ajv;
  private readonly ops: Operation[] = [];
  private readonly cache = new Map<string, ValidateFunction>();
  private readonly doc: Json;

  constructor(doc: Json, basePath = '') {
    this.doc = doc;
    this.ajv = new Ajv({ strict: false, allErrors: true, validateFormats: true });
    addFormats(this.ajv);
    this.ajv.addSchema(doc, 'api');
    for (const [template, item] of Object.entries<Json>(doc.paths)) {
      for (const method of ['get', 'post', 'put', 'patch', 'delete']) {
        if (!item[method]) continue;
        const names: string[] = [];
        const re = template.replace(/[.*+?^$()|[\]\\]/g, '\\$&').replace(/\{([^}]+)\}/g, (_m, n: string) => {
          names.push(n);
          return '([^/]+)';
        });
        this.ops.push({
          method: method.toUpperCase(),
          template,
          pattern: new RegExp(`^${basePath}${re}$`),
          names,
          op: item[method],
        });
      }
    }
  }

  private validator(ptr: string): ValidateFunction {
    let v = this.cache.get(ptr);
    if (!v) {
      v = this.ajv.compile({ $ref: `api${ptr}` });
      this.cache.set(ptr, v);
    }
    return v;
  }

  private deref(node: Json): Json {
    while (node?.$ref)
      node = node.$ref
        .slice(2)
        .split('/')
        .reduce((n: Json, k: string) => n[k.replace(/~1/g, '/').replace(/~0/g, '~')], this.doc);
    return node;
  }

  private checkValue(schema: Json, raw: string, where: string, problems: string[]) {
    const s = this.deref(schema);
    let value: unknown = raw;
    if (s.type === 'integer') {
      if (!/^-?\d+$/.test(raw)) return problems.push(`${where}: ${JSON.stringify(raw)} is not an integer`);
      value = Number(raw);
    } else if (s.type === 'boolean') value = raw === 'true' ? true : raw === 'false' ? false : raw;
    const v = this.ajv.compile(s);
    if (!v(value)) problems.push(`${where}: ${this.ajv.errorsText(v.errors)}`);
  }

  /** Problems with a request; an empty list means it follows the description. */
  check(
    method: string,
    url: URL,
    headers: Record<string, string | string[] | undefined>,
    rawBody: string,
  ): { problems: string[]; request?: CheckedRequest; op?: Operation } {
    const problems: string[] = [];
    const path = url.pathname;
    const op = this.ops.find((o) => o.method === method && o.pattern.test(path));
    if (!op) return { problems: [`${method} ${url.pathname}: no such operation in the description`] };
    const values = op.pattern.exec(path)!.slice(1).map(decodeURIComponent);
    const params: Record<string, string> = Object.fromEntries(op.names.map((n, i) => [n, values[i]!]));
    const declared = [...(this.doc.paths[op.template].parameters ?? []), ...(op.op.parameters ?? [])].map((p: Json) =>
      this.deref(p),
    );
    for (const p of declared) {
      if (p.in === 'path') this.checkValue(p.schema, params[p.name] ?? '', `path parameter ${p.name}`, problems);
      if (p.in === 'query') {
        const v = url.searchParams.get(p.name);
        if (v === null) {
          if (p.required) problems.push(`query parameter ${p.name} is required`);
        } else this.checkValue(p.schema, v, `query parameter ${p.name}`, problems);
      }
    }
    const known = new Set(declared.filter((p: Json) => p.in === 'query').map((p: Json) => p.name));
    for (const k of url.searchParams.keys())
      if (!known.has(k)) problems.push(`query parameter ${k} is not in the description`);
    let body: unknown;
    const rb = this.deref(op.op.requestBody);
    if (rb) {
      const ct = String(headers['content-type'] ?? '');
      if (!ct.startsWith('application/json'))
        problems.push(`content-type must be application/json, got ${JSON.stringify(ct)}`);
      try {
        body = JSON.parse(rawBody);
      } catch {
        problems.push('the body is not JSON');
      }
      const ptr = pointer(
        'paths',
        op.template,
        op.method.toLowerCase(),
        'requestBody',
        'content',
        'application/json',
        'schema',
      );
      const v = this.validator(
        op.op.requestBody.$ref ? `${op.op.requestBody.$ref}/content/application~1json/schema` : ptr,
      );
      if (!v(body)) problems.push(`request body: ${this.ajv.errorsText(v.errors)}`);
    } else if (rawBody) problems.push(`${method} ${op.template} takes no body`);
    return { problems, request: { method, template: op.template, params, query: url.searchParams, body }, op };
  }

  /** Problems with a response the fake is about to send. */
  checkResponse(op: Operation, status: number, body: unknown): string[] {
    const res = this.deref(op.op.responses[String(status)]);
    if (!res) return [`${op.method} ${op.template}: status ${status} is not described`];
    if (!res.content) return [];
    const ptr = op.op.responses[String(status)].$ref
      ? `${op.op.responses[String(status)].$ref}/content/application~1json/schema`
      : pointer(
          'paths',
          op.template,
          op.method.toLowerCase(),
          'responses',
          String(status),
          'content',
          'application/json',
          'schema',
        );
    const v = this.validator(ptr);
    return v(body) ? [] : [`response ${status} of ${op.method} ${op.template}: ${this.ajv.errorsText(v.errors)}`];
  }
}
