// GitHub's published REST description (npm @octokit/openapi), trimmed at load time to the Actions
// secrets routes the backend uses, $refs resolved, request bodies and responses compiled with ajv.
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import * as path from 'node:path';
import { Ajv, type ValidateFunction } from 'ajv';

type Obj = Record<string, unknown>;

export const GITHUB_SECRET_ROUTES = [
  '/repos/{owner}/{repo}/actions/secrets',
  '/repos/{owner}/{repo}/actions/secrets/public-key',
  '/repos/{owner}/{repo}/actions/secrets/{secret_name}',
  '/repos/{owner}/{repo}/environments/{environment_name}/secrets',
  '/repos/{owner}/{repo}/environments/{environment_name}/secrets/public-key',
  '/repos/{owner}/{repo}/environments/{environment_name}/secrets/{secret_name}',
] as const;

export interface Operation {
  route: string;
  method: string;
  operationId: string;
  params: Record<string, string>;
  validateBody?: ValidateFunction;
  validateResponse: Map<number, ValidateFunction | undefined>;
}

export interface GitHubDescription {
  /** The operation a request hits, with its path parameters; undefined if the description has none. */
  match(method: string, rawPath: string): Operation | undefined;
  routes: string[];
}

function resolveRefs(node: unknown, doc: Obj, depth = 0): unknown {
  if (depth > 40) throw new Error('$ref nesting too deep');
  if (Array.isArray(node)) return node.map((n) => resolveRefs(n, doc, depth + 1));
  if (!node || typeof node !== 'object') return node;
  const o = node as Obj;
  if (typeof o.$ref === 'string') {
    const target = (o.$ref as string)
      .replace(/^#\//, '')
      .split('/')
      .reduce<unknown>((acc, k) => (acc as Obj)[k.replace(/~1/g, '/').replace(/~0/g, '~')], doc);
    return resolveRefs(target, doc, depth + 1);
  }
  const out: Obj = {};
  for (const [k, v] of Object.entries(o)) out[k] = resolveRefs(v, doc, depth + 1);
  return out;
}

/** OpenAPI 3.0 schema → JSON Schema (nullable → null type; OpenAPI-only keywords dropped). */
function toJsonSchema(s: unknown): unknown {
  if (Array.isArray(s)) return s.map(toJsonSchema);
  if (!s || typeof s !== 'object') return s;
  const o: Obj = {};
  for (const [k, v] of Object.entries(s as Obj)) {
    if (
      [
        'example',
        'examples',
        'xml',
        'externalDocs',
        'discriminator',
        'readOnly',
        'writeOnly',
        'deprecated',
        'x-github',
      ].includes(k)
    )
      continue;
    o[k] =
      k === 'properties'
        ? Object.fromEntries(Object.entries(v as Obj).map(([pk, pv]) => [pk, toJsonSchema(pv)]))
        : toJsonSchema(v);
  }
  if (o.nullable === true) {
    delete o.nullable;
    if (typeof o.type === 'string') o.type = [o.type, 'null'];
    else if (o.enum) o.enum = [...(o.enum as unknown[]), null];
  } else delete o.nullable;
  return o;
}

let cached: GitHubDescription | undefined;

export function loadGitHubDescription(): GitHubDescription {
  if (cached) return cached;
  const require = createRequire(import.meta.url);
  const file = path.join(
    path.dirname(require.resolve('@octokit/openapi/package.json')),
    'generated',
    'api.github.com.json',
  );
  const doc = JSON.parse(readFileSync(file, 'utf8')) as Obj;
  const paths = doc.paths as Record<string, Record<string, Obj>>;
  const ajv = new Ajv({ strict: false, allErrors: true, validateFormats: false });
  const ops: { re: RegExp; names: string[]; route: string; method: string; op: Operation }[] = [];
  for (const route of GITHUB_SECRET_ROUTES) {
    const item = paths[route];
    if (!item) throw new Error(`GitHub's description has no route ${route}`);
    for (const [method, raw] of Object.entries(item)) {
      if (!['get', 'put', 'post', 'delete', 'patch'].includes(method)) continue;
      const op = resolveRefs(raw, doc) as Obj;
      const bodySchema = ((op.requestBody as Obj | undefined)?.content as Obj | undefined)?.['application/json'] as
        | Obj
        | undefined;
      const validateResponse = new Map<number, ValidateFunction | undefined>();
      for (const [status, resp] of Object.entries((op.responses ?? {}) as Record<string, Obj>)) {
        const schema = ((resp.content as Obj | undefined)?.['application/json'] as Obj | undefined)?.schema;
        validateResponse.set(Number(status), schema ? ajv.compile(toJsonSchema(schema) as Obj) : undefined);
      }
      const names: string[] = [];
      const re = new RegExp(
        `^${route.replace(/[.*+?^$()|[\]\\]/g, '\\$&').replace(/\\?\{([a-z_]+)\\?\}/g, (_m, n: string) => {
          names.push(n);
          return '([^/]+)';
        })}$`,
      );
      ops.push({
        re,
        names,
        route,
        method: method.toUpperCase(),
        op: {
          route,
          method: method.toUpperCase(),
          operationId: String(op.operationId),
          params: {},
          ...(bodySchema?.schema ? { validateBody: ajv.compile(toJsonSchema(bodySchema.schema) as Obj) } : {}),
          validateResponse,
        },
      });
    }
  }
  cached = {
    routes: [...GITHUB_SECRET_ROUTES],
    match(method, rawPath) {
      // Literal routes (public-key) before templated ones ({secret_name}).
      const candidates = ops.filter((o) => o.method === method).sort((a, b) => a.names.length - b.names.length);
      for (const o of candidates) {
        const m = o.re.exec(rawPath);
        if (!m) continue;
        const params: Record<string, string> = {};
        for (const [i, n] of o.names.entries()) params[n] = decodeURIComponent(m[i + 1]!);
        return { ...o.op, params };
      }
      return undefined;
    },
  };
  return cached;
}
