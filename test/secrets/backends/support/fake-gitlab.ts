// A fake GitLab REST API (v4) for project CI/CD variables, following docs.gitlab.com/api/
// project_level_variables: PRIVATE-TOKEN auth, role checks (Maintainer), token scopes,
// environment scopes with filter[environment_scope], 400 "has already been taken", masking
// validation, hidden variables, and offset pagination headers (X-Next-Page, X-Total-Pages).
import { startRecordingServer, type Recorded, type RecordingServer, type Reply } from './recording-server.js';

export interface GitLabVariable {
  variable_type: 'env_var' | 'file';
  key: string;
  value: string;
  protected: boolean;
  masked: boolean;
  hidden: boolean;
  raw: boolean;
  environment_scope: string;
  description: string | null;
}

export interface FakeGitLabOptions {
  token: string;
  /** Numeric id and full path of the one project. */
  projectId: number;
  projectPath: string;
  accessLevel?: number;
  scopes?: string[];
  /** Called before a POST is decided: lets a test create the variable concurrently. */
  beforeCreate?: (key: string, scope: string) => void;
}

export interface FakeGitLab {
  server: RecordingServer;
  url: string;
  apiUrl: string;
  requests: Recorded[];
  variables: GitLabVariable[];
  violations: string[];
  close(): Promise<void>;
}

const ATTRS = [
  'key',
  'value',
  'variable_type',
  'protected',
  'masked',
  'masked_and_hidden',
  'raw',
  'environment_scope',
  'description',
];
const MASKABLE = /^[A-Za-z0-9_+=/@:.~-]{8,}$/;

export async function startFakeGitLab(o: FakeGitLabOptions): Promise<FakeGitLab> {
  const variables: GitLabVariable[] = [];
  const violations: string[] = [];
  const level = o.accessLevel ?? 40;
  const scopes = o.scopes ?? ['api'];
  const shown = (v: GitLabVariable): Record<string, unknown> => ({ ...v, value: v.hidden ? null : v.value });

  const handler = (r: Recorded): Reply => {
    if (r.headers['private-token'] !== o.token) return { status: 401, body: { message: '401 Unauthorized' } };
    const m = /^\/api\/v4\/(.*)$/.exec(r.rawPath);
    if (!m) return { status: 404, body: { error: '404 Not Found' } };
    const route = m[1]!;
    if (route === 'personal_access_tokens/self' && r.method === 'GET') {
      return {
        status: 200,
        body: { id: 7, name: 'kms-sync', revoked: false, active: true, scopes, user_id: 3, expires_at: '2030-01-01' },
      };
    }
    const pm = /^projects\/([^/]+)(?:\/(variables)(?:\/([^/]+))?)?$/.exec(route);
    if (!pm) return { status: 404, body: { error: '404 Not Found' } };
    const idRaw = decodeURIComponent(pm[1]!);
    if (idRaw !== String(o.projectId) && idRaw !== o.projectPath)
      return { status: 404, body: { message: '404 Project Not Found' } };
    if (pm[1]!.includes('/')) violations.push('project path not URL-encoded');
    if (!pm[2]) {
      if (r.method !== 'GET') return { status: 405, body: {} };
      return {
        status: 200,
        body: {
          id: o.projectId,
          path_with_namespace: o.projectPath,
          permissions: { project_access: { access_level: level, notification_level: 3 }, group_access: null },
        },
      };
    }
    const writes = r.method !== 'GET';
    if (level < 40) return { status: 403, body: { message: '403 Forbidden' } };
    if (writes && !scopes.includes('api'))
      return {
        status: 403,
        body: {
          error: 'insufficient_scope',
          error_description: 'The request requires higher privileges than provided by the access token.',
          scope: 'api',
        },
      };
    if (!writes && !scopes.includes('api') && !scopes.includes('read_api'))
      return { status: 403, body: { error: 'insufficient_scope' } };
    const body = (r.json ?? {}) as Record<string, unknown>;
    if (writes) {
      if (r.headers['content-type'] !== 'application/json')
        violations.push(`content-type ${String(r.headers['content-type'])}`);
      for (const k of Object.keys(body)) if (!ATTRS.includes(k)) violations.push(`unknown variable attribute '${k}'`);
    }
    const keyParam = pm[3] === undefined ? undefined : decodeURIComponent(pm[3]);
    const filterScope = r.query.get('filter[environment_scope]');
    const find = (key: string): GitLabVariable[] =>
      variables.filter((v) => v.key === key && (filterScope === null || v.environment_scope === filterScope));
    if (keyParam === undefined && r.method === 'GET') {
      const perPage = Math.min(Number(r.query.get('per_page') ?? 20), 100);
      const page = Number(r.query.get('page') ?? 1);
      const totalPages = Math.max(1, Math.ceil(variables.length / perPage));
      return {
        status: 200,
        body: variables.slice((page - 1) * perPage, page * perPage).map(shown),
        headers: {
          'x-page': String(page),
          'x-per-page': String(perPage),
          'x-next-page': page < totalPages ? String(page + 1) : '',
          'x-total': String(variables.length),
          'x-total-pages': String(totalPages),
        },
      };
    }
    if (keyParam === undefined && r.method === 'POST') {
      const key = body.key;
      const scope = typeof body.environment_scope === 'string' ? body.environment_scope : '*';
      if (typeof key !== 'string' || !/^[A-Za-z0-9_]{1,255}$/.test(key))
        return { status: 400, body: { message: { key: ["can contain only letters, digits and '_'."] } } };
      if (typeof body.value !== 'string') return { status: 400, body: { error: 'value is missing' } };
      o.beforeCreate?.(key, scope);
      if (variables.some((v) => v.key === key && v.environment_scope === scope))
        return { status: 400, body: { message: { key: [`(${key}) has already been taken`] } } };
      const masked = body.masked === true || body.masked_and_hidden === true;
      if (masked && !MASKABLE.test(body.value)) return { status: 400, body: { message: { value: ['is invalid'] } } };
      const v: GitLabVariable = {
        variable_type: body.variable_type === 'file' ? 'file' : 'env_var',
        key,
        value: body.value,
        protected: body.protected === true,
        masked,
        hidden: body.masked_and_hidden === true,
        raw: body.raw === true,
        environment_scope: scope,
        description: typeof body.description === 'string' ? body.description : null,
      };
      if (v.description !== null && v.description.length > 255)
        return { status: 400, body: { message: { description: ['is too long (maximum is 255 characters)'] } } };
      variables.push(v);
      return { status: 201, body: shown(v) };
    }
    if (keyParam !== undefined) {
      const hits = find(keyParam);
      if (hits.length > 1)
        return {
          status: 409,
          body: {
            message: "There are multiple variables with provided parameters. Please use 'filter[environment_scope]'",
          },
        };
      const v = hits[0];
      if (!v) return { status: 404, body: { message: '404 Variable Not Found' } };
      if (r.method === 'GET') return { status: 200, body: shown(v) };
      if (r.method === 'PUT') {
        if (body.key !== undefined) violations.push('PUT must not change the key');
        const value = typeof body.value === 'string' ? body.value : v.value;
        const masked = body.masked === undefined ? v.masked : body.masked === true;
        if (masked && !MASKABLE.test(value)) return { status: 400, body: { message: { value: ['is invalid'] } } };
        if (v.hidden && body.masked === false)
          return { status: 400, body: { message: { masked: ['cannot be unset for hidden variables'] } } };
        if (typeof body.description === 'string' && body.description.length > 255)
          return { status: 400, body: { message: { description: ['is too long (maximum is 255 characters)'] } } };
        v.value = value;
        v.masked = masked;
        if (typeof body.protected === 'boolean') v.protected = body.protected;
        if (typeof body.raw === 'boolean') v.raw = body.raw;
        if (typeof body.description === 'string') v.description = body.description;
        if (typeof body.environment_scope === 'string') v.environment_scope = body.environment_scope;
        return { status: 200, body: shown(v) };
      }
      if (r.method === 'DELETE') {
        variables.splice(variables.indexOf(v), 1);
        return { status: 204 };
      }
    }
    return { status: 405, body: {} };
  };
  const server = await startRecordingServer(handler);
  return {
    server,
    url: server.url,
    apiUrl: `${server.url}/api/v4`,
    requests: server.requests,
    variables,
    violations,
    close: () => server.close(),
  };
}
