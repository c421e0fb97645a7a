// Contract tests: the emulator over real HTTP, every operation, every response body checked
// against schemas/kms-api.openapi.yaml, and the choices of docs/contract-decisions.md.
import {
  createCipheriv,
  createHash,
  createPublicKey,
  diffieHellman,
  generateKeyPairSync,
  hkdfSync,
  randomBytes,
} from 'node:crypto';
import { readFileSync, rmSync } from 'node:fs';
import { request as httpRequest } from 'node:http';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startEmulator } from '../../src/emulator/index.js';
import {
  assertMatchesContract,
  CONTRACT_FILE,
  listOperations,
  loadContract,
  matchPathTemplate,
} from '../support/contract.js';
import { scratchDir } from '../support/scratch.js';

// eslint-disable-next-line @typescript-eslint/no-explicit-any
type J = any;
interface Res {
  status: number;
  body: J;
  headers: Headers;
  text: string;
}
type Query = Record<string, string | number | boolean | undefined>;
interface CallOptions {
  query?: Query;
  body?: unknown;
  rawBody?: string;
  headers?: Record<string, string>;
  /** Credentials: project key via x-api-key (default), bearer, none, or a literal x-api-key value. */
  auth?: 'key' | 'bearer' | 'none' | { apiKey: string } | { bearer: string };
}

const API_KEY = 'sk_test_contract';
const RAW_KEY = /^kmsc_[A-Za-z0-9_-]{43}$/;
const ISO = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?Z$/;

let emu: { url: string; close(): Promise<void> };
let dir: string;
let dataFile: string;
/** `METHOD /template` → statuses seen, to prove every operation was exercised. */
const seen = new Map<string, Set<number>>();

function urlOf(base: string, path: string, query?: Query): string {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(query ?? {})) if (v !== undefined) q.set(k, String(v));
  const qs = q.toString();
  return `${base}${path}${qs ? `?${qs}` : ''}`;
}

/** One HTTP call; the response body (and required headers) is always checked against the contract. */
async function callAt(base: string, method: string, path: string, opts: CallOptions = {}): Promise<Res> {
  const headers: Record<string, string> = { accept: 'application/json', ...opts.headers };
  const auth = opts.auth ?? 'key';
  if (auth === 'key') headers['x-api-key'] = API_KEY;
  else if (auth === 'bearer') headers.authorization = `Bearer ${API_KEY}`;
  else if (auth !== 'none' && 'apiKey' in auth) headers['x-api-key'] = auth.apiKey;
  else if (auth !== 'none' && 'bearer' in auth) headers.authorization = `Bearer ${auth.bearer}`;
  let body: string | undefined;
  if (opts.rawBody !== undefined) body = opts.rawBody;
  else if (opts.body !== undefined) body = JSON.stringify(opts.body);
  if (body !== undefined) headers['content-type'] ??= 'application/json';
  const res = await fetch(urlOf(base, path, opts.query), { method, headers, body });
  const text = await res.text();
  const ct = res.headers.get('content-type') ?? '';
  let parsed: J = text;
  if (ct.includes('json')) parsed = JSON.parse(text);
  const template = matchPathTemplate(path) ?? path;
  assertMatchesContract(method, template, res.status, parsed, res.headers);
  if (res.status >= 400) {
    expect(ct, `${method} ${path}: errors are JSON`).toMatch(/^application\/json/);
    expect(parsed.status, `${method} ${path}: error.status echoes the HTTP status`).toBe(res.status);
  }
  const key = `${method} ${template}`;
  if (!seen.has(key)) seen.set(key, new Set());
  seen.get(key)!.add(res.status);
  return { status: res.status, body: parsed, headers: res.headers, text };
}

const call = (method: string, path: string, opts: CallOptions = {}) => callAt(emu.url, method, path, opts);

/** Asserts an error response `{code, status, error}` with the given status and code. */
function expectError(res: Res, status: number, code: string, message?: RegExp | string) {
  expect({ status: res.status, code: res.body?.code }, JSON.stringify(res.body)).toEqual({ status, code });
  if (message !== undefined) expect(res.body.error).toMatch(message);
}

const mp = (methodPath: string) => `/endpoint/${encodeURIComponent(methodPath)}`;

async function createProject(
  slug: string,
  templates: Array<{ name: string; rateLimitDay: number; maxClients?: number }>,
  extra: Record<string, unknown> = {},
) {
  const res = await call('POST', '/project', {
    body: {
      slug,
      name: `Project ${slug}`,
      description: `desc ${slug}`,
      envs: [{ type: 'production', url: 'https://api.example.com', templates }],
      ...extra,
    },
  });
  expect(res.status, JSON.stringify(res.body)).toBe(201);
  return res.body;
}

async function templatesOf(pe: string): Promise<Record<string, J>> {
  const res = await call('GET', '/client/templates', { query: { project_env: pe, limit: 100 } });
  expect(res.status).toBe(200);
  return Object.fromEntries(res.body.data.map((t: J) => [t.name, t]));
}

async function createClient(pe: string, body: Record<string, unknown>) {
  const res = await call('POST', '/client', { query: { project_env: pe }, body });
  expect(res.status, JSON.stringify(res.body)).toBe(201);
  return res.body;
}

// ------------------------------------------------------------------ client-side encryption
interface EncryptOptions {
  info?: string;
  aad?: string;
  saltOrder?: 'documented' | 'reversed';
}

/** The documented scheme, written independently of the emulator: X25519 + HKDF-SHA256 + AES-256-GCM. */
function encryptBody(serverPublicB64: string, plaintext: unknown, o: EncryptOptions = {}) {
  const serverRaw = Buffer.from(serverPublicB64, 'base64');
  const serverKey = createPublicKey({
    key: { kty: 'OKP', crv: 'X25519', x: serverRaw.toString('base64url') },
    format: 'jwk',
  });
  const eph = generateKeyPairSync('x25519');
  const epk = Buffer.from(eph.publicKey.export({ format: 'jwk' }).x!, 'base64url');
  expect(epk).toHaveLength(32);
  const shared = diffieHellman({ privateKey: eph.privateKey, publicKey: serverKey });
  const salt = o.saltOrder === 'reversed' ? Buffer.concat([serverRaw, epk]) : Buffer.concat([epk, serverRaw]);
  const key = Buffer.from(hkdfSync('sha256', shared, salt, o.info ?? 'kms-validation-v1', 32));
  const iv = randomBytes(12);
  const cipher = createCipheriv('aes-256-gcm', key, iv);
  cipher.setAAD(Buffer.from(o.aad ?? 'v1'));
  const ct = Buffer.concat([cipher.update(JSON.stringify(plaintext), 'utf8'), cipher.final(), cipher.getAuthTag()]);
  return { v: '1', epk: epk.toString('base64'), iv: iv.toString('base64'), ct: ct.toString('base64') };
}

/** POST with a declared Content-Length over node:http (the server may answer before reading it all). */
function postLarge(
  url: string,
  bytes: number,
): Promise<{ status: number; body: J; headers: Record<string, string | string[] | undefined> }> {
  const payload = Buffer.from(JSON.stringify({ name: 'big', templateId: 'x', metadata: { blob: 'a'.repeat(bytes) } }));
  return new Promise((resolve, reject) => {
    const req = httpRequest(
      url,
      {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'content-length': payload.length, 'x-api-key': API_KEY },
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () =>
          resolve({
            status: res.statusCode ?? 0,
            body: JSON.parse(Buffer.concat(chunks).toString('utf8')),
            headers: res.headers,
          }),
        );
        res.on('error', reject);
      },
    );
    req.on('error', (e: NodeJS.ErrnoException) => {
      // The server may close after answering; the response handler resolves in that case.
      if (e.code !== 'EPIPE' && e.code !== 'ECONNRESET') reject(e);
    });
    req.end(payload);
  });
}

// ------------------------------------------------------------------ shared fixture
const FX = { slug: 'fx', pe: 'fx-production' };
let fxTemplates: Record<string, J>;
let fxClient: J;
let fxRawKey: string;

beforeAll(async () => {
  dir = scratchDir('kms-contract-');
  dataFile = join(dir, 'state.json');
  emu = await startEmulator({ port: 0, apiKeys: [API_KEY], dataFile });
  await createProject(FX.slug, [
    { name: 'basic', rateLimitDay: 1000, maxClients: 50 },
    { name: 'tiny', rateLimitDay: 2, maxClients: 2 },
  ]);
  fxTemplates = await templatesOf(FX.pe);
  fxClient = await createClient(FX.pe, { name: 'fixture', templateId: fxTemplates.basic.id, keys: [{ name: 'main' }] });
  fxRawKey = fxClient.keys[0].key;
});

afterAll(async () => {
  await emu?.close();
  rmSync(dir, { recursive: true, force: true });
});

/** A concrete path for each template, on the fixture. */
function concrete(template: string): string {
  return template
    .replace('{project_env}', FX.pe)
    .replace('{client_uuid}', fxClient.id)
    .replace('{method_path}', encodeURIComponent('GET:/fixture'));
}

const AUTHENTICATED_OPS = listOperations().filter(
  ([, , op]) => !(Array.isArray(op.security) && op.security.length === 0),
);

// ==================================================================================== meta
describe('meta operations', () => {
  it('GET /openapi.yaml and /openapi.json serve this contract without credentials', async () => {
    const yaml = await call('GET', '/openapi.yaml', { auth: 'none' });
    expect(yaml.status).toBe(200);
    expect(yaml.headers.get('content-type')).toMatch(/yaml/);
    expect(yaml.text).toBe(readFileSync(CONTRACT_FILE, 'utf8'));
    const json = await call('GET', '/openapi.json', { auth: 'none' });
    expect(json.status).toBe(200);
    expect(json.body).toEqual(loadContract());
  });

  it('GET /encryption-key answers the X25519 public key and needs credentials', async () => {
    const res = await call('GET', '/encryption-key');
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ v: '1', alg: 'X25519-HKDF-SHA256-A256GCM' });
    expect(Buffer.from(res.body.publicKey, 'base64')).toHaveLength(32);
    expectError(await call('GET', '/encryption-key', { auth: 'none' }), 401, 'UNAUTHORIZED');
  });
});

// ==================================================================================== auth
describe('authentication', () => {
  it('accepts the project key as x-api-key and as Bearer', async () => {
    expect((await call('GET', '/project', { auth: 'key' })).status).toBe(200);
    expect((await call('GET', '/project', { auth: 'bearer' })).status).toBe(200);
  });

  it('401 UNAUTHORIZED without credentials on every authenticated operation', async () => {
    expect(AUTHENTICATED_OPS.length).toBe(19);
    for (const [method, template] of AUTHENTICATED_OPS) {
      const res = await call(method, concrete(template), {
        auth: 'none',
        query: { project_env: FX.pe, method_path: 'GET:/fixture' },
        body: method === 'POST' || method === 'PUT' ? {} : undefined,
      });
      expectError(res, 401, 'UNAUTHORIZED');
    }
  });

  it('401 INVALID_API_KEY for an unknown or malformed project key (header and bearer)', async () => {
    expectError(await call('GET', '/project', { auth: { apiKey: 'sk_test_not_a_known_key' } }), 401, 'INVALID_API_KEY');
    expectError(await call('GET', '/project', { auth: { apiKey: 'garbage' } }), 401, 'INVALID_API_KEY');
    expectError(await call('GET', '/project', { auth: { bearer: 'sk_live_unknown' } }), 401, 'INVALID_API_KEY');
    expectError(
      await call('GET', '/client', { auth: { bearer: 'sk_live_unknown' }, query: { project_env: FX.pe } }),
      401,
      'INVALID_API_KEY',
    );
  });

  it('403 CUSTOMER_KEY_NOT_ALLOWED for a customer key on every authenticated operation', async () => {
    expect(fxRawKey).toMatch(RAW_KEY);
    for (const [method, template] of AUTHENTICATED_OPS) {
      const res = await call(method, concrete(template), {
        auth: { apiKey: fxRawKey },
        query: { project_env: FX.pe, method_path: 'GET:/fixture' },
        body: method === 'POST' || method === 'PUT' ? {} : undefined,
      });
      expectError(res, 403, 'CUSTOMER_KEY_NOT_ALLOWED');
    }
    expectError(await call('GET', '/project', { auth: { bearer: fxRawKey } }), 403, 'CUSTOMER_KEY_NOT_ALLOWED');
    // The response never echoes the customer key.
    const res = await call('GET', '/project', { auth: { apiKey: fxRawKey } });
    expect(res.text).not.toContain(fxRawKey);
  });
});

// ==================================================================================== generic errors
describe('generic errors', () => {
  it('404 NOT_FOUND for an unknown route', async () => {
    expectError(await call('GET', '/no-such-thing'), 404, 'NOT_FOUND');
    expectError(await call('GET', '/client/a/b', { query: { project_env: FX.pe } }), 404, 'NOT_FOUND');
  });

  it('405 METHOD_NOT_ALLOWED with Allow for a wrong method on an existing path', async () => {
    const patch = await call('PATCH', '/project', { body: {} });
    expectError(patch, 405, 'METHOD_NOT_ALLOWED');
    expect(patch.headers.get('allow')?.split(/,\s*/).sort()).toEqual(['GET', 'POST']);
    expectError(await call('DELETE', '/project'), 405, 'METHOD_NOT_ALLOWED');
    expectError(await call('PUT', '/encryption-key', { body: {} }), 405, 'METHOD_NOT_ALLOWED');
    expectError(await call('POST', '/project/fx-production/logs', { body: {} }), 405, 'METHOD_NOT_ALLOWED');
    expectError(
      await call('PATCH', mp('GET:/x'), { query: { project_env: FX.pe }, body: {} }),
      405,
      'METHOD_NOT_ALLOWED',
    );
  });

  it('405 for a method not defined on the literal path /client/templates (literal beats {client_uuid})', async () => {
    const mismatches: string[] = [];
    for (const method of ['POST', 'PUT', 'DELETE']) {
      const res = await fetch(urlOf(emu.url, '/client/templates', { project_env: FX.pe, method_path: 'GET:/x' }), {
        method,
        headers: { 'x-api-key': API_KEY, 'content-type': 'application/json' },
        body: method === 'DELETE' ? undefined : '{}',
      });
      const body = (await res.json()) as J;
      if (res.status !== 405 || body.code !== 'METHOD_NOT_ALLOWED' || res.headers.get('allow') !== 'GET')
        mismatches.push(
          `${method} /client/templates → ${res.status} ${body.code} (allow: ${res.headers.get('allow')})`,
        );
      else assertMatchesContract(method, '/client/templates', res.status, body, res.headers);
    }
    expect(mismatches).toEqual([]);
  });

  it('400 INVALID_JSON for a malformed body', async () => {
    expectError(await call('POST', '/project', { rawBody: '{"slug": "x",' }), 400, 'INVALID_JSON');
    expectError(
      await call('POST', '/client', { query: { project_env: FX.pe }, rawBody: 'not json' }),
      400,
      'INVALID_JSON',
    );
    expectError(await call('PUT', mp('GET:/x'), { query: { project_env: FX.pe }, rawBody: '{' }), 400, 'INVALID_JSON');
  });

  it('400 VALIDATION_ERROR for wrong types, naming the field path', async () => {
    const t = fxTemplates.basic.id;
    expectError(
      await call('POST', '/client', {
        query: { project_env: FX.pe },
        body: { name: 'x', templateId: t, keys: [{ name: 5 }] },
      }),
      400,
      'VALIDATION_ERROR',
      /keys\[0\]\.name/,
    );
    expectError(
      await call('POST', '/client', {
        query: { project_env: FX.pe },
        body: { name: 'x', templateId: t, ipWhitelist: '10.0.0.0/8' },
      }),
      400,
      'VALIDATION_ERROR',
      /ipWhitelist/,
    );
    expectError(
      await call('POST', '/project', {
        body: {
          slug: 'typed',
          name: 'T',
          envs: [{ type: 'production', url: 'https://x.example', templates: [{ name: 'a', rateLimitDay: '10' }] }],
        },
      }),
      400,
      'VALIDATION_ERROR',
      /envs\[0\]\.templates\[0\]\.rateLimitDay/,
    );
    expectError(
      await call('PUT', `/client/${fxClient.id}`, { query: { project_env: FX.pe }, body: { metadata: [] } }),
      400,
      'VALIDATION_ERROR',
      /metadata/,
    );
    expectError(
      await call('POST', '/client', { query: { project_env: FX.pe }, body: { name: 'x' } }),
      400,
      'VALIDATION_ERROR',
      /templateId/,
    );
    expectError(await call('POST', '/client', { query: { project_env: FX.pe }, body: [] }), 400, 'VALIDATION_ERROR');
  });

  it('400 VALIDATION_ERROR for unknown fields, top-level and nested', async () => {
    expectError(
      await call('POST', '/project', {
        body: { slug: 'unknown-f', name: 'U', envs: [{ type: 'production', url: 'https://x.example' }], bogus: 1 },
      }),
      400,
      'VALIDATION_ERROR',
      /unknown field.*bogus|bogus.*unknown field/,
    );
    expectError(
      await call('POST', '/client', {
        query: { project_env: FX.pe },
        body: { name: 'x', templateId: fxTemplates.basic.id, keys: [{ name: 'k', secret: 's' }] },
      }),
      400,
      'VALIDATION_ERROR',
      /keys\[0\]\.secret/,
    );
    // Nothing was created by the rejected requests.
    expectError(await call('GET', '/project/unknown-f-production'), 404, 'NOT_FOUND');
  });

  it('413 PAYLOAD_TOO_LARGE for a body over 1 MiB, and nothing is created', async () => {
    const before = (await call('GET', '/client', { query: { project_env: FX.pe } })).body.pagination.total;
    const res = await postLarge(urlOf(emu.url, '/client', { project_env: FX.pe }), 1024 * 1024 + 10);
    assertMatchesContract('POST', '/client', res.status, res.body);
    expect(res.status).toBe(413);
    expect(res.body.code).toBe('PAYLOAD_TOO_LARGE');
    expect((await call('GET', '/client', { query: { project_env: FX.pe } })).body.pagination.total).toBe(before);
    // Just under the limit is processed normally (here: rejected for the unknown template, not for size).
    const ok = await postLarge(urlOf(emu.url, '/client', { project_env: FX.pe }), 1024 * 1024 - 200);
    expect(ok.status).toBe(400);
    expect(ok.body.code).toBe('VALIDATION_ERROR');
  });

  it('400 when project_env is missing and 404 when it is unknown, on every env-scoped operation', async () => {
    const scoped = listOperations().filter(
      ([m, p]) =>
        (p.startsWith('/client') || p.startsWith('/endpoint')) && !(m === 'DELETE' && p === '/client/{client_uuid}'),
    );
    expect(scoped.length).toBe(11);
    const mismatches: string[] = [];
    for (const [method, template] of scoped) {
      const path = concrete(template);
      const body = method === 'POST' || method === 'PUT' ? {} : undefined;
      const missing = await call(method, path, { query: { method_path: 'GET:/fixture' }, body });
      if (
        missing.status !== 400 ||
        missing.body.code !== 'VALIDATION_ERROR' ||
        !String(missing.body.error).includes("query parameter 'project_env' is required")
      )
        mismatches.push(`${method} ${template} without project_env → ${missing.status} ${missing.body?.code ?? ''}`);
      const unknown = await call(method, path, {
        query: { project_env: 'nope-production', method_path: 'GET:/fixture' },
        body,
      });
      if (
        unknown.status !== 404 ||
        unknown.body.code !== 'NOT_FOUND' ||
        !String(unknown.body.error).includes("environment 'nope-production' not found")
      )
        mismatches.push(
          `${method} ${template} with unknown project_env → ${unknown.status} ${unknown.body?.code ?? ''} ${unknown.body?.error ?? ''}`,
        );
    }
    expect(mismatches).toEqual([]);
    expectError(await call('GET', '/project/nope-production/logs'), 404, 'NOT_FOUND');
    expectError(await call('GET', '/project/nope-production'), 404, 'NOT_FOUND');
  });

  it('400 for invalid page/limit on every list operation; limit above 100 is clamped', async () => {
    const lists: Array<[string, Query]> = [
      ['/project', {}],
      [`/project/${FX.pe}/logs`, {}],
      ['/client', { project_env: FX.pe }],
      ['/client/templates', { project_env: FX.pe }],
      ['/endpoint', { project_env: FX.pe }],
    ];
    for (const [path, q] of lists) {
      for (const bad of [
        { page: 0 },
        { page: -1 },
        { page: 'abc' },
        { page: 1.5 },
        { limit: 0 },
        { limit: -5 },
        { limit: 'x' },
        { limit: 2.5 },
      ]) {
        expectError(await call('GET', path, { query: { ...q, ...bad } }), 400, 'VALIDATION_ERROR', Object.keys(bad)[0]);
      }
      const def = await call('GET', path, { query: q });
      expect(def.body.pagination).toMatchObject({ page: 1, limit: 10 });
      for (const limit of [100, 101, 1000]) {
        const res = await call('GET', path, { query: { ...q, limit } });
        expect(res.status).toBe(200);
        expect(res.body.pagination.limit).toBe(100);
      }
    }
  });
});

// ==================================================================================== projects
describe('projects', () => {
  it('POST /project creates a project with envs and templates (201); maxClients defaults to 100', async () => {
    const p = await createProject('proj-a', [
      { name: 'gold', rateLimitDay: 500, maxClients: 3 },
      { name: 'free', rateLimitDay: 10 },
    ]);
    expect(p).toMatchObject({ slug: 'proj-a', name: 'Project proj-a', description: 'desc proj-a' });
    expect(p.envs.count).toBe(1);
    expect(p.envs.list[0]).toMatchObject({
      project_env: 'proj-a-production',
      type: 'production',
      clients: { count: 0, max: 103 },
    });
    const t = await templatesOf('proj-a-production');
    expect(t.free).toMatchObject({
      maxClients: 100,
      rateLimitDay: 10,
      project_env: 'proj-a-production',
      clients: { count: 0 },
    });
    expect(t.gold).toMatchObject({ maxClients: 3, rateLimitDay: 500 });
    expect(t.gold.id).not.toBe(t.free.id);
  });

  it('POST /project with several envs', async () => {
    const res = await call('POST', '/project', {
      body: {
        slug: 'multi',
        name: 'Multi',
        envs: [
          {
            type: 'production',
            url: 'https://api.multi.example',
            templates: [{ name: 'a', rateLimitDay: 1, maxClients: 1 }],
          },
          {
            type: 'staging',
            url: 'https://staging.multi.example',
            templates: [{ name: 'a', rateLimitDay: 1, maxClients: 4 }],
          },
        ],
      },
    });
    expect(res.status).toBe(201);
    expect(res.body.envs.count).toBe(2);
    expect(res.body.envs.list.map((e: J) => [e.project_env, e.clients.max]).sort()).toEqual([
      ['multi-production', 1],
      ['multi-staging', 4],
    ]);
  });

  it('409 CONFLICT for a duplicate slug', async () => {
    expectError(
      await call('POST', '/project', {
        body: { slug: 'proj-a', name: 'again', envs: [{ type: 'production', url: 'https://x.example' }] },
      }),
      409,
      'CONFLICT',
    );
  });

  it('409 CONFLICT for a duplicate template name in one environment (create)', async () => {
    const res = await call('POST', '/project', {
      body: {
        slug: 'dup-tpl',
        name: 'D',
        envs: [
          {
            type: 'production',
            url: 'https://x.example',
            templates: [
              { name: 'x', rateLimitDay: 1 },
              { name: 'x', rateLimitDay: 2 },
            ],
          },
        ],
      },
    });
    expectError(res, 409, 'CONFLICT');
    expectError(await call('GET', '/project/dup-tpl-production'), 404, 'NOT_FOUND');
  });

  it('400 for an invalid slug or env type', async () => {
    expectError(
      await call('POST', '/project', {
        body: { slug: 'Bad_Slug', name: 'B', envs: [{ type: 'production', url: 'https://x.example' }] },
      }),
      400,
      'VALIDATION_ERROR',
      /slug/,
    );
    expectError(
      await call('POST', '/project', {
        body: { slug: 'okslug', name: 'B', envs: [{ type: 'pre-prod', url: 'https://x.example' }] },
      }),
      400,
      'VALIDATION_ERROR',
      /envs\[0\]\.type/,
    );
  });

  it('GET /project pages, filters by name (case-insensitive substring) and status', async () => {
    await createProject('zebra', [{ name: 't', rateLimitDay: 1 }], { name: 'Zebra Corp' });
    const all = await call('GET', '/project', { query: { limit: 100 } });
    expect(all.status).toBe(200);
    const total = all.body.pagination.total;
    expect(total).toBe(all.body.data.length);
    expect(total).toBeGreaterThanOrEqual(4);
    const byName = await call('GET', '/project', { query: { name: 'zEBRA' } });
    expect(byName.body.data.map((p: J) => p.slug)).toEqual(['zebra']);
    expect(byName.body.pagination).toEqual({ total: 1, page: 1, limit: 10, pages: 1 });
    expect((await call('GET', '/project', { query: { status: 'active', limit: 100 } })).body.pagination.total).toBe(
      total,
    );
    expect((await call('GET', '/project', { query: { status: 'archived' } })).body).toMatchObject({
      data: [],
      pagination: { total: 0 },
    });
    // Paging: pages of 2 cover all projects exactly once; past the end is an empty page.
    const pages = Math.ceil(total / 2);
    const slugs: string[] = [];
    for (let page = 1; page <= pages; page++) {
      const res = await call('GET', '/project', { query: { page, limit: 2 } });
      expect(res.body.pagination).toEqual({ total, page, limit: 2, pages });
      slugs.push(...res.body.data.map((p: J) => p.slug));
    }
    expect(new Set(slugs).size).toBe(total);
    const past = await call('GET', '/project', { query: { page: pages + 1, limit: 2 } });
    expect(past.status).toBe(200);
    expect(past.body.data).toEqual([]);
  });

  it('GET /project/{project_env} answers the full record', async () => {
    const res = await call('GET', '/project/proj-a-production');
    expect(res.status).toBe(200);
    const env = res.body.envs.list[0];
    expect(env).toMatchObject({
      project_env: 'proj-a-production',
      url: 'https://api.example.com',
      endpoints: { count: 0 },
    });
    expect(env.templates.map((t: J) => t.name).sort()).toEqual(['free', 'gold']);
    expectError(await call('GET', '/project/proj-b-production'), 404, 'NOT_FOUND');
  });

  it('PUT /project/{project_env} updates name, url and upserts templates (others kept)', async () => {
    const before = await templatesOf('proj-a-production');
    const res = await call('PUT', '/project/proj-a-production', {
      body: {
        name: 'Renamed A',
        singleEnv: {
          url: 'https://v2.example.com',
          templates: [
            { name: 'gold', rateLimitDay: 900 },
            { name: 'silver', rateLimitDay: 50, maxClients: 5 },
          ],
        },
      },
    });
    expect(res.status).toBe(200);
    expect(res.body.name).toBe('Renamed A');
    const got = await call('GET', '/project/proj-a-production');
    expect(got.body.name).toBe('Renamed A');
    expect(got.body.description).toBe('desc proj-a');
    expect(got.body.envs.list[0].url).toBe('https://v2.example.com');
    const after = await templatesOf('proj-a-production');
    expect(Object.keys(after).sort()).toEqual(['free', 'gold', 'silver']);
    expect(after.gold).toMatchObject({ id: before.gold.id, rateLimitDay: 900, maxClients: 3 });
    expect(after.free).toMatchObject({ id: before.free.id, rateLimitDay: 10 });
    expect(after.silver).toMatchObject({ rateLimitDay: 50, maxClients: 5 });
    // Upsert by id can rename.
    const byId = await call('PUT', '/project/proj-a-production', {
      body: { singleEnv: { templates: [{ id: after.silver.id, name: 'bronze', rateLimitDay: 51 }] } },
    });
    expect(byId.status).toBe(200);
    const renamed = await templatesOf('proj-a-production');
    expect(renamed.bronze).toMatchObject({ id: after.silver.id, rateLimitDay: 51 });
    expect(renamed.silver).toBeUndefined();
  });

  it('PUT /project: 409 on a template rename clash; 400 for description; 404 for an unknown project', async () => {
    const t = await templatesOf('proj-a-production');
    expectError(
      await call('PUT', '/project/proj-a-production', {
        body: { singleEnv: { templates: [{ id: t.bronze.id, name: 'gold', rateLimitDay: 1 }] } },
      }),
      409,
      'CONFLICT',
    );
    expectError(
      await call('PUT', '/project/proj-a-production', { body: { description: 'nope' } }),
      400,
      'VALIDATION_ERROR',
      /description/,
    );
    expectError(await call('PUT', '/project/ghost-production', { body: { name: 'x' } }), 404, 'NOT_FOUND');
  });

  it('PUT /project creates a missing env of an existing project; url required then', async () => {
    expectError(
      await call('PUT', '/project/proj-a-dev', { body: { singleEnv: { templates: [] } } }),
      400,
      'VALIDATION_ERROR',
      /url/,
    );
    const res = await call('PUT', '/project/proj-a-staging', {
      body: {
        singleEnv: {
          url: 'https://staging.example.com',
          templates: [{ name: 'stage', rateLimitDay: 5, maxClients: 7 }],
        },
      },
    });
    expect(res.status).toBe(200);
    const got = await call('GET', '/project/proj-a-staging');
    expect(got.body.envs.count).toBe(2);
    const staging = got.body.envs.list.find((e: J) => e.project_env === 'proj-a-staging');
    expect(staging).toMatchObject({
      type: 'staging',
      url: 'https://staging.example.com',
      clients: { count: 0, max: 7 },
    });
    expect(Object.keys(await templatesOf('proj-a-staging'))).toEqual(['stage']);
  });

  it('DELETE /project: kind required; RESOURCE_IN_USE without forceDelete; cascades with it', async () => {
    await createProject('del', [
      { name: 'keep', rateLimitDay: 1 },
      { name: 'used', rateLimitDay: 1 },
    ]);
    await call('PUT', '/project/del-staging', {
      body: { singleEnv: { url: 'https://s.example', templates: [{ name: 's', rateLimitDay: 1 }] } },
    });
    await call('PUT', '/project/del-qa', {
      body: { singleEnv: { url: 'https://qa.example', templates: [{ name: 'q', rateLimitDay: 1 }] } },
    });
    const t = await templatesOf('del-production');
    const c = await createClient('del-production', { name: 'user', templateId: t.used.id, keys: [{ name: 'k' }] });
    const st = await templatesOf('del-staging');
    const sc = await createClient('del-staging', { name: 'stager', templateId: st.s.id });

    expectError(await call('DELETE', '/project/del-production'), 400, 'VALIDATION_ERROR', /kind/);
    expectError(
      await call('DELETE', '/project/del-production', { query: { kind: 'everything' } }),
      400,
      'VALIDATION_ERROR',
      /kind/,
    );
    expectError(
      await call('DELETE', '/project/del-production', { query: { kind: 'env' } }),
      400,
      'VALIDATION_ERROR',
      /envId/,
    );
    expectError(
      await call('DELETE', '/project/del-production', { query: { kind: 'template' } }),
      400,
      'VALIDATION_ERROR',
      /templateId/,
    );
    expectError(
      await call('DELETE', '/project/del-production', { query: { kind: 'template', templateId: 'nope' } }),
      404,
      'NOT_FOUND',
    );
    expectError(await call('DELETE', '/project/ghost-production', { query: { kind: 'project' } }), 404, 'NOT_FOUND');

    // Template: unused goes without force; used needs it and takes its clients along.
    const unused = await call('DELETE', '/project/del-production', {
      query: { kind: 'template', templateId: t.keep.id },
    });
    expect(unused.body).toEqual({ success: true, deleted: 'template' });
    expectError(
      await call('DELETE', '/project/del-production', { query: { kind: 'template', templateId: t.used.id } }),
      409,
      'RESOURCE_IN_USE',
    );
    expect((await call('GET', `/client/${c.id}`, { query: { project_env: 'del-production' } })).status).toBe(200);
    const forced = await call('DELETE', '/project/del-production', {
      query: { kind: 'template', templateId: t.used.id, forceDelete: true },
    });
    expect(forced.body).toEqual({ success: true, deleted: 'template' });
    expectError(await call('GET', `/client/${c.id}`, { query: { project_env: 'del-production' } }), 404, 'NOT_FOUND');
    expect(await templatesOf('del-production')).toEqual({});

    // Env: by id (empty env, no force needed) and by project_env (in use).
    const full = await call('GET', '/project/del-production');
    const qa = full.body.envs.list.find((e: J) => e.project_env === 'del-qa');
    expect((await call('DELETE', '/project/del-production', { query: { kind: 'env', envId: qa.id } })).body).toEqual({
      success: true,
      deleted: 'env',
    });
    expectError(await call('GET', '/project/del-qa'), 404, 'NOT_FOUND');
    expectError(
      await call('DELETE', '/project/del-production', { query: { kind: 'env', envId: 'del-staging' } }),
      409,
      'RESOURCE_IN_USE',
    );
    expect(
      (
        await call('DELETE', '/project/del-production', {
          query: { kind: 'env', envId: 'del-staging', forceDelete: 'true' },
        })
      ).body,
    ).toEqual({ success: true, deleted: 'env' });
    expectError(await call('GET', '/project/del-staging'), 404, 'NOT_FOUND');
    expectError(await call('GET', `/client/${sc.id}`, { query: { project_env: 'del-staging' } }), 404, 'NOT_FOUND');

    // Project: in use → 409, forced → gone with everything.
    await createClient('del-production', {
      name: 'again',
      templateId: (
        await call('PUT', '/project/del-production', {
          body: { singleEnv: { templates: [{ name: 'n', rateLimitDay: 1 }] } },
        })
      ).body.envs.list[0].templates[0].id,
    });
    expectError(
      await call('DELETE', '/project/del-production', { query: { kind: 'project' } }),
      409,
      'RESOURCE_IN_USE',
    );
    expect(
      (await call('DELETE', '/project/del-production', { query: { kind: 'project', forceDelete: true } })).body,
    ).toEqual({ success: true, deleted: 'project' });
    expectError(await call('GET', '/project/del-production'), 404, 'NOT_FOUND');
    expect((await call('GET', '/project', { query: { name: 'Project del' } })).body.data).toEqual([]);
    // A project without clients is deleted without force.
    await createProject('empty', [{ name: 'e', rateLimitDay: 1 }]);
    expect((await call('DELETE', '/project/empty-production', { query: { kind: 'project' } })).body).toEqual({
      success: true,
      deleted: 'project',
    });
  });
});

// ==================================================================================== templates + clients
describe('clients', () => {
  const PE = 'cli-production';
  let t: Record<string, J>;

  beforeAll(async () => {
    await createProject('cli', [
      { name: 'std', rateLimitDay: 100, maxClients: 20 },
      { name: 'pair', rateLimitDay: 100, maxClients: 2 },
      { name: 'other', rateLimitDay: 1 },
    ]);
    t = await templatesOf(PE);
  });

  it('GET /client/templates answers the paged envelope of templates with client counts', async () => {
    const res = await call('GET', '/client/templates', { query: { project_env: PE, limit: 2 } });
    expect(res.body.pagination).toEqual({ total: 3, page: 1, limit: 2, pages: 2 });
    expect(res.body.data).toHaveLength(2);
    const p2 = await call('GET', '/client/templates', { query: { project_env: PE, limit: 2, page: 2 } });
    expect(p2.body.data).toHaveLength(1);
    expect(new Set([...res.body.data, ...p2.body.data].map((x: J) => x.id)).size).toBe(3);
  });

  it('POST /client creates one client, raw key once, with documented defaults', async () => {
    const c = await createClient(PE, {
      name: 'Acme',
      templateId: t.std.id,
      ipWhitelist: ['10.0.0.0/8'],
      metadata: { tier: 'gold', n: 1 },
      keys: [{ name: 'primary', expiresAt: '2099-01-01T00:00:00Z', autoRotate: true }, { name: 'secondary' }],
    });
    expect(c).toMatchObject({
      name: 'Acme',
      type: 'company',
      templateId: t.std.id,
      project_env: PE,
      metadata: { tier: 'gold', n: 1 },
    });
    expect(c.client_uuid).toBe(c.id);
    expect(c.ipWhitelist).toEqual(['10.0.0.0/8']);
    expect(c.keys).toHaveLength(2);
    for (const k of c.keys) {
      expect(k.key).toMatch(RAW_KEY);
      expect(k.keyPrefix).toBe(k.key.slice(0, 12));
      expect(k.createdAt).toMatch(ISO);
    }
    expect(c.keys[0]).toMatchObject({ name: 'primary', autoRotate: true });
    expect(Date.parse(c.keys[0].expiresAt)).toBe(Date.parse('2099-01-01T00:00:00Z'));
    expect(c.keys[1]).toMatchObject({ name: 'secondary', expiresAt: null, autoRotate: false });
    expect(c.keys[0].key).not.toBe(c.keys[1].key);

    // Never again: single GET and list answer keys without the raw value.
    const got = await call('GET', `/client/${c.id}`, { query: { project_env: PE } });
    expect(got.body.keys.map((k: J) => k.id)).toEqual(c.keys.map((k: J) => k.id));
    for (const k of got.body.keys) expect(k).not.toHaveProperty('key');
    const list = await call('GET', '/client', { query: { project_env: PE, name: 'Acme' } });
    for (const raw of c.keys.map((k: J) => k.key)) {
      const sha = createHash('sha256').update(raw).digest();
      for (const secret of [
        raw,
        raw.slice(12),
        sha.toString('hex'),
        sha.toString('base64'),
        sha.toString('base64url'),
      ]) {
        expect(got.text).not.toContain(secret);
        expect(list.text).not.toContain(secret);
      }
    }
  });

  it('raw keys are stored only as SHA-256 in the --data file', async () => {
    const c = await createClient(PE, { name: 'Hashed', templateId: t.std.id, keys: [{ name: 'k' }] });
    const raw: string = c.keys[0].key;
    const persisted = readFileSync(dataFile, 'utf8');
    expect(persisted).toContain(c.id);
    expect(persisted).not.toContain(raw);
    expect(persisted).not.toContain(raw.slice(12)); // not even the secret part
    const sha = createHash('sha256').update(raw).digest();
    expect(
      [sha.toString('hex'), sha.toString('base64'), sha.toString('base64url')].some((h) => persisted.includes(h)),
    ).toBe(true);
  });

  it('client names are not unique; client type is a lower-case identifier', async () => {
    const a = await createClient(PE, { name: 'Twin', templateId: t.other.id });
    const b = await createClient(PE, { name: 'Twin', templateId: t.other.id });
    expect(a.id).not.toBe(b.id);
    expect((await call('GET', '/client', { query: { project_env: PE, name: 'Twin' } })).body.pagination.total).toBe(2);
    expectError(
      await call('POST', '/client', {
        query: { project_env: PE },
        body: { name: 'x', templateId: t.std.id, type: 'Big Co' },
      }),
      400,
      'VALIDATION_ERROR',
      /type/,
    );
    await call('DELETE', `/client/${a.id}`);
    await call('DELETE', `/client/${b.id}`);
  });

  it('GET /client/{client_uuid} answers stats and keys; 404 elsewhere', async () => {
    const c = await createClient(PE, { name: 'Stats', type: 'individual', templateId: t.std.id });
    const got = await call('GET', `/client/${c.id}`, { query: { project_env: PE } });
    expect(got.body).toMatchObject({
      id: c.id,
      name: 'Stats',
      type: 'individual',
      keys: [],
      stats: { total: 0, success: 0, error: 0, today: 0 },
    });
    expectError(
      await call('GET', '/client/00000000-0000-4000-8000-000000000000', { query: { project_env: PE } }),
      404,
      'NOT_FOUND',
    );
    expectError(await call('GET', `/client/${c.id}`, { query: { project_env: FX.pe } }), 404, 'NOT_FOUND');
  });

  it('bulk POST /client: array in, array out (same order); all-or-nothing; 1..100 items', async () => {
    const before = (await call('GET', '/client', { query: { project_env: PE } })).body.pagination.total;
    const res = await call('POST', '/client', {
      query: { project_env: PE },
      body: [
        { name: 'Bulk 1', templateId: t.std.id, keys: [{ name: 'a' }] },
        { name: 'Bulk 2', templateId: t.std.id, type: 'team', keys: [{ name: 'b' }] },
      ],
    });
    expect(res.status).toBe(201);
    expect(res.body.map((c: J) => c.name)).toEqual(['Bulk 1', 'Bulk 2']);
    for (const c of res.body) expect(c.keys[0].key).toMatch(RAW_KEY);
    expect((await call('GET', '/client', { query: { project_env: PE } })).body.pagination.total).toBe(before + 2);

    expectError(
      await call('POST', '/client', {
        query: { project_env: PE },
        body: [
          { name: 'Ok', templateId: t.std.id },
          { name: 'Bad', templateId: t.std.id, keys: [{ name: 1 }] },
        ],
      }),
      400,
      'VALIDATION_ERROR',
      /\[1\]\.keys\[0\]\.name/,
    );
    expectError(
      await call('POST', '/client', {
        query: { project_env: PE },
        body: [
          { name: 'Ok', templateId: t.std.id },
          { name: 'Bad', templateId: 'nope' },
        ],
      }),
      400,
      'VALIDATION_ERROR',
      /templateId/,
    );
    expectError(
      await call('POST', '/client', {
        query: { project_env: PE },
        body: Array.from({ length: 101 }, (_, i) => ({ name: `n${i}`, templateId: t.std.id })),
      }),
      400,
      'VALIDATION_ERROR',
    );
    expect((await call('GET', '/client', { query: { project_env: PE } })).body.pagination.total).toBe(before + 2);
  });

  it('GET /client filters by name (exact), type and templateId; list items carry keys, no stats, no raw keys', async () => {
    await createClient(PE, { name: 'Filter Me', type: 'team', templateId: t.other.id, keys: [{ name: 'fk' }] });
    const byName = await call('GET', '/client', { query: { project_env: PE, name: 'Filter Me' } });
    expect(byName.body.data.map((c: J) => c.name)).toEqual(['Filter Me']);
    expect(byName.body.data[0].keys.map((k: J) => k.name)).toEqual(['fk']);
    expect(byName.body.data[0]).not.toHaveProperty('stats');
    expect(byName.body.data[0].keys[0]).not.toHaveProperty('key');
    expect((await call('GET', '/client', { query: { project_env: PE, name: 'Filter' } })).body.data).toEqual([]);
    const byType = await call('GET', '/client', { query: { project_env: PE, type: 'team', limit: 100 } });
    expect(byType.body.data.map((c: J) => c.name).sort()).toEqual(['Bulk 2', 'Filter Me']);
    const byTemplate = await call('GET', '/client', { query: { project_env: PE, templateId: t.other.id } });
    expect(byTemplate.body.data.map((c: J) => c.name)).toEqual(['Filter Me']);
    const combined = await call('GET', '/client', { query: { project_env: PE, type: 'team', templateId: t.std.id } });
    expect(combined.body.data.map((c: J) => c.name)).toEqual(['Bulk 2']);
    expect((await templatesOf(PE)).other.clients.count).toBe(1);
  });

  it('GET /client paging edges: last page, empty page past the end, limit clamp', async () => {
    const total = (await call('GET', '/client', { query: { project_env: PE } })).body.pagination.total;
    expect(total).toBeGreaterThanOrEqual(6);
    const pages = Math.ceil(total / 4);
    const last = await call('GET', '/client', { query: { project_env: PE, limit: 4, page: pages } });
    expect(last.body.pagination).toEqual({ total, page: pages, limit: 4, pages });
    expect(last.body.data).toHaveLength(total - 4 * (pages - 1));
    const past = await call('GET', '/client', { query: { project_env: PE, limit: 4, page: pages + 1 } });
    expect(past.status).toBe(200);
    expect(past.body).toMatchObject({ data: [], pagination: { total, page: pages + 1, limit: 4, pages } });
    const clamped = await call('GET', '/client', { query: { project_env: PE, limit: 500 } });
    expect(clamped.body.pagination).toEqual({ total, page: 1, limit: 100, pages: 1 });
    expect(clamped.body.data).toHaveLength(total);
  });

  it('GET /client lists a client as it is now: after an update, a key issued and a key deleted (as GET /client/{uuid} shows it)', async () => {
    const c = await createClient(PE, {
      name: 'Listed',
      templateId: t.std.id,
      metadata: { v: '1' },
      keys: [{ name: 'a' }],
    });
    const listed = async () => {
      const byName = await call('GET', '/client', { query: { project_env: PE, name: c.name } });
      const got = await call('GET', `/client/${c.id}`, { query: { project_env: PE } });
      const { stats: _stats, ...view } = got.body;
      expect(byName.body.data).toEqual([view]);
      return byName.body.data[0];
    };
    expect((await listed()).metadata).toEqual({ v: '1' });
    await call('PUT', `/client/${c.id}`, {
      query: { project_env: PE },
      body: { metadata: { v: '2' }, ipWhitelist: ['10.1.0.0/16'], keys: [{ name: 'b' }] },
    });
    const updated = await listed();
    expect(updated.metadata).toEqual({ v: '2' });
    expect(updated.ipWhitelist).toEqual(['10.1.0.0/16']);
    expect(updated.keys.map((k: J) => k.name)).toEqual(['a', 'b']);
    await call('DELETE', `/client/${c.id}`, { query: { project_env: PE, keyId: c.keys[0].id } });
    expect((await listed()).keys.map((k: J) => k.name)).toEqual(['b']);
    await call('DELETE', `/client/${c.id}`, { query: { project_env: PE } });
  });

  it('PUT /client merges fields and upserts keys: new key raw once, existing updated, unlisted kept', async () => {
    const c = await createClient(PE, {
      name: 'Upsert',
      templateId: t.std.id,
      metadata: { a: 1, b: 2 },
      keys: [{ name: 'one' }, { name: 'two' }],
    });
    const [one, two] = c.keys;
    const res = await call('PUT', `/client/${c.id}`, {
      query: { project_env: PE },
      body: {
        name: 'Upserted',
        metadata: { c: 3 },
        ipWhitelist: ['192.168.0.0/16'],
        keys: [
          { id: one.id, name: 'one-renamed', expiresAt: '2098-05-05T00:00:00Z', autoRotate: true },
          { name: 'three' },
        ],
      },
    });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({
      name: 'Upserted',
      type: 'company',
      templateId: t.std.id,
      metadata: { c: 3 },
      ipWhitelist: ['192.168.0.0/16'],
    });
    expect(res.body.metadata).toEqual({ c: 3 }); // replaced, not merged
    const keys = Object.fromEntries(res.body.keys.map((k: J) => [k.name, k]));
    expect(Object.keys(keys).sort()).toEqual(['one-renamed', 'three', 'two']);
    expect(keys['one-renamed']).toMatchObject({ id: one.id, autoRotate: true, keyPrefix: one.keyPrefix });
    expect(Date.parse(keys['one-renamed'].expiresAt)).toBe(Date.parse('2098-05-05T00:00:00Z'));
    expect(keys['one-renamed']).not.toHaveProperty('key');
    expect(keys.two).toMatchObject({ id: two.id });
    expect(keys.two).not.toHaveProperty('key');
    expect(keys.three.key).toMatch(RAW_KEY);
    expect(keys.three.keyPrefix).toBe(keys.three.key.slice(0, 12));

    const got = await call('GET', `/client/${c.id}`, { query: { project_env: PE } });
    expect(got.body.keys).toHaveLength(3);
    for (const k of got.body.keys) expect(k).not.toHaveProperty('key');
    expect(got.text).not.toContain(keys.three.key);
    expect(got.body.name).toBe('Upserted');

    // Omitted fields are unchanged.
    const partial = await call('PUT', `/client/${c.id}`, { query: { project_env: PE }, body: { type: 'team' } });
    expect(partial.body).toMatchObject({ name: 'Upserted', type: 'team', metadata: { c: 3 } });
    expect(partial.body.keys).toHaveLength(3);

    expectError(
      await call('PUT', `/client/${c.id}`, {
        query: { project_env: PE },
        body: { keys: [{ id: 'no-such-key', name: 'x' }] },
      }),
      404,
      'NOT_FOUND',
    );
    expectError(
      await call('PUT', `/client/${c.id}`, { query: { project_env: PE }, body: { secret: 1 } }),
      400,
      'VALIDATION_ERROR',
      /secret/,
    );
    expectError(
      await call('PUT', `/client/${c.id}`, { query: { project_env: PE }, body: { templateId: 'nope' } }),
      400,
      'VALIDATION_ERROR',
      /templateId/,
    );
    expectError(
      await call('PUT', '/client/00000000-0000-4000-8000-000000000000', {
        query: { project_env: PE },
        body: { name: 'x' },
      }),
      404,
      'NOT_FOUND',
    );
  });

  it('DELETE /client/{uuid}?keyId deletes one key; without keyId the client', async () => {
    const c = await createClient(PE, { name: 'Deleter', templateId: t.std.id, keys: [{ name: 'a' }, { name: 'b' }] });
    const del = await call('DELETE', `/client/${c.id}`, { query: { keyId: c.keys[0].id } });
    expect(del.body).toEqual({ success: true, deleted: 'key', id: c.keys[0].id });
    const got = await call('GET', `/client/${c.id}`, { query: { project_env: PE } });
    expect(got.body.keys.map((k: J) => k.name)).toEqual(['b']);
    expectError(await call('DELETE', `/client/${c.id}`, { query: { keyId: c.keys[0].id } }), 404, 'NOT_FOUND');
    expectError(await call('DELETE', `/client/${c.id}`, { query: { project_env: FX.pe } }), 404, 'NOT_FOUND');
    const gone = await call('DELETE', `/client/${c.id}`, { query: { project_env: PE } });
    expect(gone.body).toEqual({ success: true, deleted: 'client', id: c.id });
    expectError(await call('GET', `/client/${c.id}`, { query: { project_env: PE } }), 404, 'NOT_FOUND');
    expectError(await call('DELETE', `/client/${c.id}`), 404, 'NOT_FOUND');
  });

  it('409 CLIENT_LIMIT_REACHED at the template maximum; succeeds again after a delete', async () => {
    const a = await createClient(PE, { name: 'P1', templateId: t.pair.id });
    await createClient(PE, { name: 'P2', templateId: t.pair.id });
    const full = await call('POST', '/client', {
      query: { project_env: PE },
      body: { name: 'P3', templateId: t.pair.id },
    });
    expectError(full, 409, 'CLIENT_LIMIT_REACHED', /pair/);
    // Moving a client onto the full template is refused too.
    const mover = await createClient(PE, { name: 'Mover', templateId: t.std.id });
    expectError(
      await call('PUT', `/client/${mover.id}`, { query: { project_env: PE }, body: { templateId: t.pair.id } }),
      409,
      'CLIENT_LIMIT_REACHED',
    );
    expect(
      (await call('GET', '/client', { query: { project_env: PE, templateId: t.pair.id } })).body.pagination.total,
    ).toBe(2);
    await call('DELETE', `/client/${a.id}`, { query: { project_env: PE } });
    expect(
      (await call('POST', '/client', { query: { project_env: PE }, body: { name: 'P3', templateId: t.pair.id } }))
        .status,
    ).toBe(201);
    // A bulk create that would overflow creates nothing.
    await call('DELETE', `/client/${mover.id}`, { query: { project_env: PE } });
    const c2 = (await call('GET', '/client', { query: { project_env: PE, name: 'P2' } })).body.data[0];
    await call('DELETE', `/client/${c2.id}`, { query: { project_env: PE } });
    expectError(
      await call('POST', '/client', {
        query: { project_env: PE },
        body: [
          { name: 'B1', templateId: t.pair.id },
          { name: 'B2', templateId: t.pair.id },
        ],
      }),
      409,
      'CLIENT_LIMIT_REACHED',
    );
    expect(
      (await call('GET', '/client', { query: { project_env: PE, templateId: t.pair.id } })).body.pagination.total,
    ).toBe(1);
  });
});

// ==================================================================================== endpoints
describe('endpoints', () => {
  const PE = 'ep-production';
  beforeAll(async () => {
    await createProject('ep', [{ name: 't', rateLimitDay: 1 }]);
  });

  it('POST /endpoint (single) answers 201 with the record; method upper-cased; name defaults', async () => {
    const res = await call('POST', '/endpoint', {
      query: { project_env: PE },
      body: {
        method: 'get',
        path: '/orders/{id}',
        name: 'Get order',
        description: 'One order',
        request: { params: ['id'] },
        response: { type: 'object' },
        metadata: { owner: 'x' },
      },
    });
    expect(res.status).toBe(201);
    expect(res.body).toMatchObject({
      method: 'GET',
      path: '/orders/{id}',
      name: 'Get order',
      description: 'One order',
      method_path: 'GET:/orders/{id}',
      project_env: PE,
      request: { params: ['id'] },
      response: { type: 'object' },
      metadata: { owner: 'x' },
      stats: { total: 0, success: 0, error: 0 },
    });
    expect(res.body.createdAt).toMatch(ISO);
    expect(res.body.updatedAt).toMatch(ISO);
    const minimal = await call('POST', '/endpoint', {
      query: { project_env: PE },
      body: { method: 'DELETE', path: '/orders/{id}' },
    });
    expect(minimal.status).toBe(201);
    expect(minimal.body).toMatchObject({ method_path: 'DELETE:/orders/{id}', name: 'DELETE:/orders/{id}' });
  });

  it('409 CONFLICT for a duplicate method_path (also inside one array); 400 for bad method/path', async () => {
    expectError(
      await call('POST', '/endpoint', { query: { project_env: PE }, body: { method: 'GET', path: '/orders/{id}' } }),
      409,
      'CONFLICT',
    );
    expectError(
      await call('POST', '/endpoint', {
        query: { project_env: PE },
        body: [
          { method: 'PUT', path: '/dup' },
          { method: 'put', path: '/dup' },
        ],
      }),
      409,
      'CONFLICT',
    );
    expectError(await call('GET', mp('PUT:/dup'), { query: { project_env: PE } }), 404, 'NOT_FOUND');
    expectError(
      await call('POST', '/endpoint', { query: { project_env: PE }, body: { method: 'FETCH', path: '/x' } }),
      400,
      'VALIDATION_ERROR',
      /method/,
    );
    expectError(
      await call('POST', '/endpoint', { query: { project_env: PE }, body: { method: 'GET', path: 'x' } }),
      400,
      'VALIDATION_ERROR',
      /path/,
    );
    expectError(
      await call('POST', '/endpoint', { query: { project_env: PE }, body: { method: 'GET', path: '/x', extra: true } }),
      400,
      'VALIDATION_ERROR',
      /extra/,
    );
    expectError(await call('POST', '/endpoint', { query: { project_env: PE }, body: [] }), 400, 'VALIDATION_ERROR');
    expectError(
      await call('POST', '/endpoint', {
        query: { project_env: PE },
        body: Array.from({ length: 101 }, (_, i) => ({ method: 'GET', path: `/many/${i}` })),
      }),
      400,
      'VALIDATION_ERROR',
    );
    expectError(await call('GET', mp('GET:/many/0'), { query: { project_env: PE } }), 404, 'NOT_FOUND');
  });

  it('bulk POST /endpoint answers an array in order; GET /endpoint pages', async () => {
    const items = Array.from({ length: 11 }, (_, i) => ({
      method: 'GET',
      path: `/items/${String(i).padStart(2, '0')}`,
    }));
    const res = await call('POST', '/endpoint', { query: { project_env: PE }, body: items });
    expect(res.status).toBe(201);
    expect(res.body.map((e: J) => e.method_path)).toEqual(items.map((i) => `GET:${i.path}`));
    const total = 13;
    const p1 = await call('GET', '/endpoint', { query: { project_env: PE, limit: 5 } });
    expect(p1.body.pagination).toEqual({ total, page: 1, limit: 5, pages: 3 });
    expect(p1.body.data).toHaveLength(5);
    const p3 = await call('GET', '/endpoint', { query: { project_env: PE, limit: 5, page: 3 } });
    expect(p3.body.data).toHaveLength(3);
    const p4 = await call('GET', '/endpoint', { query: { project_env: PE, limit: 5, page: 4 } });
    expect(p4.status).toBe(200);
    expect(p4.body).toEqual({ data: [], pagination: { total, page: 4, limit: 5, pages: 3 } });
    const all = await call('GET', '/endpoint', { query: { project_env: PE, limit: 100 } });
    expect(all.body.data).toHaveLength(total);
    expect(new Set(all.body.data.map((e: J) => e.method_path)).size).toBe(total);
    const def = await call('GET', '/endpoint', { query: { project_env: PE } });
    expect(def.body.pagination).toEqual({ total, page: 1, limit: 10, pages: 2 });
    expect((await call('GET', '/endpoint', { query: { project_env: PE, limit: 101 } })).body.pagination.limit).toBe(
      100,
    );
    expect((await call('GET', '/project/ep-production')).body.envs.list[0].endpoints.count).toBe(total);
  });

  it('GET, PUT, DELETE /endpoint/{method_path} with the URL-encoded method_path', async () => {
    const path = mp('GET:/orders/{id}');
    expect(path).toContain('GET%3A%2Forders%2F%7Bid%7D');
    const got = await call('GET', path, { query: { project_env: PE } });
    expect(got.body).toMatchObject({ method_path: 'GET:/orders/{id}', name: 'Get order' });
    const put = await call('PUT', path, {
      query: { project_env: PE },
      body: { name: 'Fetch order', description: 'changed', metadata: { v: 2 } },
    });
    expect(put.status).toBe(200);
    expect(put.body).toMatchObject({
      name: 'Fetch order',
      description: 'changed',
      metadata: { v: 2 },
      method: 'GET',
      path: '/orders/{id}',
    });
    expect(Date.parse(put.body.updatedAt)).toBeGreaterThanOrEqual(Date.parse(got.body.updatedAt));
    expect((await call('GET', path, { query: { project_env: PE } })).body).toMatchObject({
      name: 'Fetch order',
      metadata: { v: 2 },
    });
    expectError(
      await call('PUT', path, { query: { project_env: PE }, body: { path: '/moved' } }),
      400,
      'VALIDATION_ERROR',
      /path/,
    );
    const del = await call('DELETE', path, { query: { project_env: PE } });
    expect(del.body).toEqual({ success: true, method_path: 'GET:/orders/{id}', project_env: PE });
    expectError(await call('GET', path, { query: { project_env: PE } }), 404, 'NOT_FOUND');
    expectError(await call('DELETE', path, { query: { project_env: PE } }), 404, 'NOT_FOUND');
    expectError(await call('PUT', path, { query: { project_env: PE }, body: { name: 'x' } }), 404, 'NOT_FOUND');
  });
});

// ==================================================================================== validation, stats, logs
describe('key-usage validation, stats and logs', () => {
  const PE = 'val-production';
  const ORDERS = 'GET:/orders';
  let t: Record<string, J>;
  let client: J;
  let live: string;
  let expired: string;
  let serverKey: string;

  const validate = (id: string, body: unknown, opts: { methodPath?: string; encrypted?: boolean; pe?: string } = {}) =>
    call('POST', `/client/${id}`, {
      query: { project_env: opts.pe ?? PE, method_path: opts.methodPath ?? ORDERS },
      body,
      headers: opts.encrypted ? { 'x-service-encrypted': '1' } : {},
    });
  const req = (headers: Record<string, string>, name?: string) => ({
    ...(name !== undefined ? { name } : {}),
    timestamp: new Date().toISOString(),
    headers: { 'user-agent': 'contract-test', ...headers },
    payload: { q: 1 },
  });

  beforeAll(async () => {
    await createProject('val', [
      { name: 'std', rateLimitDay: 1000, maxClients: 10 },
      { name: 'daily', rateLimitDay: 2, maxClients: 2 },
    ]);
    t = await templatesOf(PE);
    await call('POST', '/endpoint', {
      query: { project_env: PE },
      body: { method: 'GET', path: '/orders', name: 'Orders' },
    });
    client = await createClient(PE, {
      name: 'Validated',
      templateId: t.std.id,
      ipWhitelist: ['10.0.0.0/8'],
      keys: [{ name: 'live' }, { name: 'old', expiresAt: '2001-01-01T00:00:00Z' }],
    });
    live = client.keys[0].key;
    expired = client.keys[1].key;
    serverKey = (await call('GET', '/encryption-key')).body.publicKey;
  });

  const ok = (res: Res) => {
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    expect(res.body).toMatchObject({ success: true, clientId: client.id, project_env: PE });
    expect(res.body).not.toHaveProperty('reason');
    expect(Number.isInteger(res.body.durationMs)).toBe(true);
  };
  const failed = (res: Res, reason: string) => {
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    expect(res.body).toMatchObject({ success: false, reason, clientId: client.id });
  };

  it('succeeds with the key in x-api-key, in authorization Bearer, or by name alone', async () => {
    const a = await validate(client.id, req({ 'x-api-key': live, 'x-forwarded-for': '10.1.2.3, 203.0.113.9' }));
    ok(a);
    expect(a.body.method_path).toBe(ORDERS);
    ok(await validate(client.id, req({ authorization: `Bearer ${live}`, 'x-forwarded-for': '10.200.0.1' }, 'live')));
    ok(await validate(client.id, req({ 'x-forwarded-for': '10.0.0.1' }, 'live')));
  });

  it('fails with KEY_EXPIRED, IP_NOT_ALLOWED, KEY_NOT_FOUND (wrong key, wrong name)', async () => {
    failed(await validate(client.id, req({ 'x-api-key': expired, 'x-forwarded-for': '10.1.1.1' })), 'KEY_EXPIRED');
    failed(
      await validate(client.id, req({ 'x-api-key': live, 'x-forwarded-for': '192.168.1.1, 10.1.1.1' })),
      'IP_NOT_ALLOWED',
    );
    failed(
      await validate(
        client.id,
        req({ 'x-api-key': `kmsc_${randomBytes(32).toString('base64url')}`, 'x-forwarded-for': '10.1.1.1' }),
      ),
      'KEY_NOT_FOUND',
    );
    failed(
      await validate(client.id, req({ 'x-api-key': live, 'x-forwarded-for': '10.1.1.1' }, 'old')),
      'KEY_NOT_FOUND',
    );
    failed(await validate(client.id, req({ 'x-forwarded-for': '10.1.1.1' }, 'no-such-name')), 'KEY_NOT_FOUND');
    // Another client's valid key is not this client's key.
    failed(await validate(client.id, req({ 'x-api-key': fxRawKey, 'x-forwarded-for': '10.1.1.1' })), 'KEY_NOT_FOUND');
  });

  it('counts calls in the endpoint stats and the client stats', async () => {
    // So far on GET:/orders: 3 successes, 6 failures.
    const ep = await call('GET', mp(ORDERS), { query: { project_env: PE } });
    expect(ep.body.stats).toEqual({ total: 9, success: 3, error: 6 });
    ok(await validate(client.id, req({ 'x-api-key': live, 'x-forwarded-for': '10.9.9.9' })));
    failed(await validate(client.id, req({ 'x-api-key': expired, 'x-forwarded-for': '10.9.9.9' })), 'KEY_EXPIRED');
    expect((await call('GET', mp(ORDERS), { query: { project_env: PE } })).body.stats).toEqual({
      total: 11,
      success: 4,
      error: 7,
    });
    const c = await call('GET', `/client/${client.id}`, { query: { project_env: PE } });
    expect(c.body.stats).toMatchObject({ total: 11, success: 4, error: 7, today: 4 });
    // An unregistered method_path is logged but not auto-registered.
    ok(
      await validate(client.id, req({ 'x-api-key': live, 'x-forwarded-for': '10.9.9.9' }), {
        methodPath: 'POST:/unregistered',
      }),
    );
    expectError(await call('GET', mp('POST:/unregistered'), { query: { project_env: PE } }), 404, 'NOT_FOUND');
    expect((await call('GET', mp(ORDERS), { query: { project_env: PE } })).body.stats.total).toBe(11);
  });

  it('rejects bad validation requests: 404 client, 400 method_path / body', async () => {
    expectError(await validate('00000000-0000-4000-8000-000000000000', req({})), 404, 'NOT_FOUND');
    expectError(await validate(fxClient.id, req({})), 404, 'NOT_FOUND'); // a client of another environment
    expectError(
      await call('POST', `/client/${client.id}`, { query: { project_env: PE }, body: req({}) }),
      400,
      'VALIDATION_ERROR',
      /method_path/,
    );
    expectError(await validate(client.id, { ...req({}), extra: 1 }), 400, 'VALIDATION_ERROR', /extra/);
    expectError(await validate(client.id, { ...req({}), headers: 'x' }), 400, 'VALIDATION_ERROR', /headers/);
    expectError(
      await validate(client.id, { ...req({}), timestamp: 'yesterday' }),
      400,
      'VALIDATION_ERROR',
      /timestamp/,
    );
  });

  it('encrypted validation: the documented scheme decrypts; tampering fails with DECRYPTION_FAILED', async () => {
    const plain = req({ 'x-api-key': live, 'x-forwarded-for': '10.7.7.7' });
    ok(await validate(client.id, encryptBody(serverKey, plain), { encrypted: true }));
    // The decrypted body goes through the same checks (failure reason, unknown fields).
    failed(
      await validate(client.id, encryptBody(serverKey, req({ 'x-api-key': expired, 'x-forwarded-for': '10.7.7.7' })), {
        encrypted: true,
      }),
      'KEY_EXPIRED',
    );
    expectError(
      await validate(client.id, encryptBody(serverKey, { ...plain, extra: 1 }), { encrypted: true }),
      400,
      'VALIDATION_ERROR',
      /extra/,
    );

    const good = encryptBody(serverKey, plain);
    const flip = (b64: string, index: number, mask: number) => {
      const buf = Buffer.from(b64, 'base64');
      const i = index < 0 ? buf.length + index : index;
      buf.writeUInt8(buf.readUInt8(i) ^ mask, i);
      return buf.toString('base64');
    };
    const otherServer = generateKeyPairSync('x25519').publicKey.export({ format: 'jwk' }).x!;
    const variants: Array<[string, unknown]> = [
      ['flipped ciphertext bit', { ...good, ct: flip(good.ct, 0, 0x01) }],
      ['flipped tag bit', { ...good, ct: flip(good.ct, -1, 0x80) }],
      ['changed iv', { ...good, iv: flip(good.iv, 0, 0x01) }],
      ['foreign epk', { ...good, epk: encryptBody(serverKey, plain).epk }],
      ['wrong version', { ...good, v: '2' }],
      ['short iv', { ...good, iv: Buffer.alloc(8).toString('base64') }],
      ['wrong server key', encryptBody(Buffer.from(otherServer, 'base64url').toString('base64'), plain)],
      ['wrong HKDF info', encryptBody(serverKey, plain, { info: 'kms-validation-v2' })],
      ['wrong HKDF salt order', encryptBody(serverKey, plain, { saltOrder: 'reversed' })],
      ['wrong AAD', encryptBody(serverKey, plain, { aad: 'v2' })],
      ['plain body sent as encrypted', plain],
      ['missing ct', { v: good.v, epk: good.epk, iv: good.iv }],
    ];
    for (const [what, body] of variants) {
      const res = await validate(client.id, body, { encrypted: true });
      expect(res.body.code, what).toBe('DECRYPTION_FAILED');
      expectError(res, 400, 'DECRYPTION_FAILED');
    }
    // An envelope without the header is a validation error (unknown fields v, epk, ...).
    expectError(await validate(client.id, good), 400, 'VALIDATION_ERROR');
    // The good envelope still works (it was not consumed by the failures above).
    ok(await validate(client.id, good, { encrypted: true }));
  });

  it('429 DAILY_LIMIT_EXCEEDED with Retry-After to the next UTC midnight', async () => {
    const d = await createClient(PE, { name: 'Daily', templateId: t.daily.id, keys: [{ name: 'k' }] });
    const key = d.keys[0].key;
    for (let i = 0; i < 2; i++) {
      const res = await validate(d.id, req({ 'x-api-key': key }));
      expect(res.body).toMatchObject({ success: true, clientId: d.id });
    }
    const limited = await validate(d.id, req({ 'x-api-key': key }));
    expectError(limited, 429, 'DAILY_LIMIT_EXCEEDED');
    const retryAfter = Number(limited.headers.get('retry-after'));
    const now = new Date();
    const midnight = Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), now.getUTCDate() + 1);
    const expected = (midnight - now.getTime()) / 1000;
    expect(Math.abs(retryAfter - expected)).toBeLessThanOrEqual(5);
    expectError(await validate(d.id, req({ 'x-api-key': key })), 429, 'DAILY_LIMIT_EXCEEDED');
    const stats = (await call('GET', `/client/${d.id}`, { query: { project_env: PE } })).body.stats;
    expect(stats.today).toBe(2);
    // Limited calls are logged as errors.
    const logs = await call('GET', `/project/${PE}/logs`, { query: { clientId: d.id } });
    expect(logs.body.data.map((l: J) => l.status)).toEqual(['error', 'error', 'success', 'success']);
  });

  it('GET /project/{project_env}/logs: newest first, filters methodPath, clientId, status; paging', async () => {
    const all = await call('GET', `/project/${PE}/logs`, { query: { limit: 100 } });
    expect(all.status).toBe(200);
    const entries: J[] = all.body.data;
    expect(all.body.pagination.total).toBe(entries.length);
    // 3 + 6 (first two tests) + 3 (stats) + 3 (encrypted) + 4 (daily limit); rejected requests are not logged.
    expect(entries.length).toBe(19);
    const times = entries.map((l) => Date.parse(l.timestamp));
    expect(times).toEqual([...times].sort((a, b) => b - a));
    expect(entries.every((l) => typeof l.durationMs === 'number')).toBe(true);

    const byPath = await call('GET', `/project/${PE}/logs`, {
      query: { methodPath: 'POST:/unregistered', limit: 100 },
    });
    expect(byPath.body.data).toHaveLength(1);
    expect(byPath.body.data[0]).toMatchObject({
      method_path: 'POST:/unregistered',
      status: 'success',
      name: 'live',
      clientId: client.id,
    });

    const byClient = await call('GET', `/project/${PE}/logs`, { query: { clientId: client.id, limit: 100 } });
    expect(byClient.body.data.length).toBe(entries.filter((l) => l.clientId === client.id).length);
    expect(byClient.body.data.every((l: J) => l.clientId === client.id)).toBe(true);

    const errors = await call('GET', `/project/${PE}/logs`, {
      query: { status: 'error', methodPath: ORDERS, limit: 100 },
    });
    const ordersStats = (await call('GET', mp(ORDERS), { query: { project_env: PE } })).body.stats;
    expect(errors.body.pagination.total).toBe(ordersStats.error);
    expect(errors.body.data.every((l: J) => l.status === 'error' && l.method_path === ORDERS)).toBe(true);
    const combined = await call('GET', `/project/${PE}/logs`, {
      query: { status: 'error', methodPath: ORDERS, clientId: client.id, limit: 100 },
    });
    expect(combined.body.pagination.total).toBe(errors.body.pagination.total - 2); // minus the daily-limit client's two
    expect(
      combined.body.data.every((l: J) => l.status === 'error' && l.method_path === ORDERS && l.clientId === client.id),
    ).toBe(true);
    const successes = await call('GET', `/project/${PE}/logs`, {
      query: { status: 'success', methodPath: ORDERS, limit: 100 },
    });
    expect(successes.body.pagination.total).toBe(ordersStats.success);
    const expiredLog = errors.body.data.find((l: J) => l.name === 'old');
    expect(expiredLog).toBeDefined();

    expectError(
      await call('GET', `/project/${PE}/logs`, { query: { status: 'maybe' } }),
      400,
      'VALIDATION_ERROR',
      /status/,
    );
    const p = await call('GET', `/project/${PE}/logs`, { query: { limit: 3, page: 2 } });
    expect(p.body.data.map((l: J) => l.id)).toEqual(entries.slice(3, 6).map((l) => l.id));
    expect((await call('GET', `/project/${PE}/logs`)).body.pagination.limit).toBe(10);
    const past = await call('GET', `/project/${PE}/logs`, { query: { limit: 100, page: 2 } });
    expect(past.body.data).toEqual([]);
  });
});

// ==================================================================================== persistence
describe('persistence across restarts', () => {
  it('a restarted emulator keeps hashed keys (validation still works) and its encryption key', async () => {
    const file = join(dir, 'restart.json');
    const first = await startEmulator({ port: 0, apiKeys: [API_KEY], dataFile: file });
    let raw = '';
    let id = '';
    let publicKey = '';
    try {
      const p = await callAt(first.url, 'POST', '/project', {
        body: {
          slug: 'persist',
          name: 'P',
          envs: [{ type: 'production', url: 'https://p.example', templates: [{ name: 't', rateLimitDay: 10 }] }],
        },
      });
      const templateId = (
        await callAt(first.url, 'GET', '/client/templates', { query: { project_env: 'persist-production' } })
      ).body.data[0].id;
      expect(p.status).toBe(201);
      const c = await callAt(first.url, 'POST', '/client', {
        query: { project_env: 'persist-production' },
        body: { name: 'c', templateId, keys: [{ name: 'k' }] },
      });
      raw = c.body.keys[0].key;
      id = c.body.id;
      publicKey = (await callAt(first.url, 'GET', '/encryption-key')).body.publicKey;
    } finally {
      await first.close();
    }
    expect(readFileSync(file, 'utf8')).not.toContain(raw);
    const second = await startEmulator({ port: 0, apiKeys: [API_KEY], dataFile: file });
    try {
      const key = await callAt(second.url, 'GET', '/encryption-key');
      expect(key.body.publicKey).toBe(publicKey);
      const res = await callAt(second.url, 'POST', `/client/${id}`, {
        query: { project_env: 'persist-production', method_path: 'GET:/x' },
        headers: { 'x-service-encrypted': '1' },
        body: encryptBody(publicKey, { headers: { 'x-api-key': raw } }),
      });
      expect(res.body).toMatchObject({ success: true, clientId: id });
      const got = await callAt(second.url, 'GET', `/client/${id}`, { query: { project_env: 'persist-production' } });
      expect(got.text).not.toContain(raw);
    } finally {
      await second.close();
    }
  });
});

// ==================================================================================== coverage
describe('coverage', () => {
  it('every documented operation was exercised with its success status', () => {
    for (const [method, template, op] of listOperations()) {
      const success = Number(Object.keys(op.responses).find((s) => /^2\d\d$/.test(s)));
      expect([...(seen.get(`${method} ${template}`) ?? [])], `${method} ${template}`).toContain(success);
    }
  });
});
