// Seeded fuzz of the emulator over raw HTTP: a few thousand requests built from valid ones of
// every route (control routes included) and mutated in the request line, method, path,
// percent-encoding, query, headers, framing and body. The emulator runs as the real command, in its
// own process. Asserted: every request gets an answer, never a 5xx, every error is the documented
// `{code, status, error}` JSON, nothing appears on the emulator's stderr, and afterwards its whole
// state still reads (every project, and every environment's lists).
//
// Reproduce a failure with the seed it prints: KMS_FUZZ_SEED=<n> [KMS_FUZZ_COUNT=<n>] npx vitest run test/fuzz/http-emulator.test.ts
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  isErrorShape,
  rawExchange,
  startEmulatorProcess,
  type EmulatorProcess,
  type RawResponse,
} from '../contract/raw-http.js';

const SEED = Number(process.env.KMS_FUZZ_SEED ?? 14);
const COUNT = Number(process.env.KMS_FUZZ_COUNT ?? 3000);
const API_KEY = 'sk_test_fuzz_http_0123';
const PE = 'fz-production';

// ------------------------------------------------------------------ seeded randomness
function mulberry32(seed: number) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}
const rand = mulberry32(SEED);
const int = (n: number) => Math.floor(rand() * n);
const pick = <T>(items: readonly T[]): T => items[int(items.length)]!;
const chance = (p: number) => rand() < p;

// ------------------------------------------------------------------ the emulator process
let emulator: EmulatorProcess;
let port: number;

beforeAll(async () => {
  emulator = await startEmulatorProcess(API_KEY, ['--control']);
  port = emulator.port;
});
afterAll(() => emulator?.stop());

// ------------------------------------------------------------------ requests
interface Req {
  method: string;
  /** Path, already encoded as it goes on the wire. */
  path: string;
  query: [string, string][];
  headers: [string, string][];
  /** Body text (undefined: none). */
  body?: string;
  version: string;
  chunked?: boolean;
}

const enc = encodeURIComponent;

async function send(method: string, path: string, body?: unknown): Promise<RawResponse> {
  const text = body === undefined ? undefined : JSON.stringify(body);
  const head = [
    `${method} ${path} HTTP/1.1`,
    'Host: 127.0.0.1',
    'Connection: close',
    `x-api-key: ${API_KEY}`,
    ...(text !== undefined ? ['Content-Type: application/json', `Content-Length: ${Buffer.byteLength(text)}`] : []),
  ];
  return rawExchange(port, `${head.join('\r\n')}\r\n\r\n${text ?? ''}`);
}

/** Ids of the fixture the valid requests point at (recreated when a fuzzed delete removed it). */
const fx = { template: '', spareTemplate: '', client: '', spareClient: '', key: '' };

async function ensureFixture() {
  if ((await send('GET', `/api/v1/project/${PE}`)).status === 200) {
    const clients = (await send('GET', `/api/v1/client?project_env=${PE}&name=main`)).json as {
      data: { id: string }[];
    };
    if (clients.data.length > 0) return;
  }
  // Whatever is left of it goes (404 when nothing is), then it is made again.
  await send('DELETE', '/api/v1/project/fz?kind=project&forceDelete=true');
  const created = await send('POST', '/api/v1/project', {
    slug: 'fz',
    name: 'Fuzz',
    envs: [
      {
        type: 'production',
        url: 'https://fz.example',
        templates: [
          { name: 'basic', rateLimitDay: 1000, maxClients: 100000 },
          { name: 'spare', rateLimitDay: 1 },
        ],
      },
    ],
  });
  expect(created.status, created.body).toBe(201);
  const templates = (await send('GET', `/api/v1/client/templates?project_env=${PE}`)).json as {
    data: { id: string; name: string }[];
  };
  fx.template = templates.data.find((t) => t.name === 'basic')!.id;
  fx.spareTemplate = templates.data.find((t) => t.name === 'spare')!.id;
  const clients = (
    await send('POST', `/api/v1/client?project_env=${PE}`, [
      { name: 'main', templateId: fx.template, ipWhitelist: ['10.0.0.0/8'], keys: [{ name: 'k' }] },
      { name: 'spare', templateId: fx.template, keys: [{ name: 'k' }] },
    ])
  ).json as { id: string; keys: { id: string }[] }[];
  fx.client = clients[0]!.id;
  fx.key = clients[0]!.keys[0]!.id;
  fx.spareClient = clients[1]!.id;
  await send('POST', `/api/v1/endpoint?project_env=${PE}`, [
    { method: 'GET', path: '/x' },
    { method: 'POST', path: '/orders/{id}' },
  ]);
}

/** Valid requests of every route, pointing at the fixture. */
function corpus(): Omit<Req, 'version'>[] {
  const q = (o: Record<string, string>) => Object.entries(o);
  const auth: [string, string][] = [['x-api-key', API_KEY]];
  const json = (v: unknown) => JSON.stringify(v);
  const ct: [string, string] = ['Content-Type', 'application/json'];
  return [
    {
      method: 'GET',
      path: '/api/v1/project',
      query: q({ page: '1', limit: '10', name: 'Fuzz', status: 'active' }),
      headers: auth,
    },
    {
      method: 'POST',
      path: '/api/v1/project',
      query: [],
      headers: [...auth, ct],
      body: json({
        slug: `fz${int(50)}`,
        name: 'N',
        description: 'd',
        envs: [
          { type: 'production', url: 'https://n.example', templates: [{ name: 't', rateLimitDay: 1, maxClients: 3 }] },
        ],
      }),
    },
    { method: 'GET', path: `/api/v1/project/${PE}`, query: [], headers: auth },
    {
      method: 'PUT',
      path: `/api/v1/project/${PE}`,
      query: [],
      headers: [...auth, ct],
      body: json({
        name: 'Fuzz',
        singleEnv: {
          url: 'https://fz.example',
          templates: [
            { id: fx.template, rateLimitDay: 1000 },
            { name: 'new', rateLimitDay: 2 },
          ],
        },
      }),
    },
    {
      method: 'PUT',
      path: '/api/v1/project/fz-staging',
      query: [],
      headers: [...auth, ct],
      body: json({ singleEnv: { url: 'https://s.example' } }),
    },
    {
      method: 'DELETE',
      path: `/api/v1/project/${PE}`,
      query: q({ kind: 'template', templateId: fx.spareTemplate }),
      headers: auth,
    },
    {
      method: 'GET',
      path: `/api/v1/project/${PE}/logs`,
      query: q({ methodPath: 'GET:/x', clientId: fx.client, status: 'success', page: '1', limit: '5' }),
      headers: auth,
    },
    {
      method: 'GET',
      path: '/api/v1/client/templates',
      query: q({ project_env: PE, page: '1', limit: '100' }),
      headers: auth,
    },
    {
      method: 'GET',
      path: '/api/v1/client',
      query: q({ project_env: PE, name: 'main', type: 'company', templateId: fx.template }),
      headers: auth,
    },
    {
      method: 'POST',
      path: '/api/v1/client',
      query: q({ project_env: PE }),
      headers: [...auth, ct],
      body: json([
        {
          name: 'fz',
          type: 'company',
          templateId: fx.template,
          ipWhitelist: ['10.0.0.0/8', '2001:db8::/32'],
          metadata: { team: 'a' },
          keys: [{ name: 'k', expiresAt: '2099-01-01T00:00:00Z', autoRotate: false }],
        },
      ]),
    },
    { method: 'GET', path: `/api/v1/client/${fx.client}`, query: q({ project_env: PE }), headers: auth },
    {
      method: 'PUT',
      path: `/api/v1/client/${fx.client}`,
      query: q({ project_env: PE }),
      headers: [...auth, ct],
      body: json({
        name: 'main',
        metadata: { b: '2' },
        ipWhitelist: ['10.0.0.0/8'],
        keys: [{ id: fx.key, name: 'k', expiresAt: null }],
      }),
    },
    {
      method: 'DELETE',
      path: `/api/v1/client/${fx.spareClient}`,
      query: q({ project_env: PE, keyId: fx.key }),
      headers: auth,
    },
    {
      method: 'POST',
      path: `/api/v1/client/${fx.client}`,
      query: q({ project_env: PE, method_path: 'GET:/x' }),
      headers: [...auth, ct],
      body: json({
        name: 'k',
        timestamp: '2024-01-01T00:00:00Z',
        headers: { 'x-api-key': 'kmsc_nope', 'x-forwarded-for': '10.1.2.3' },
        payload: { a: 1 },
      }),
    },
    {
      method: 'POST',
      path: `/api/v1/client/${fx.client}`,
      query: q({ project_env: PE, method_path: 'GET:/x' }),
      headers: [...auth, ct, ['X-Service-Encrypted', '1']],
      body: json({
        v: '1',
        epk: Buffer.alloc(32, 7).toString('base64'),
        iv: Buffer.alloc(12).toString('base64'),
        ct: Buffer.alloc(40).toString('base64'),
      }),
    },
    { method: 'GET', path: '/api/v1/endpoint', query: q({ project_env: PE, page: '2', limit: '1' }), headers: auth },
    {
      method: 'POST',
      path: '/api/v1/endpoint',
      query: q({ project_env: PE }),
      headers: [...auth, ct],
      body: json([
        {
          method: 'get',
          path: `/r/${int(1000)}`,
          name: 'r',
          description: 'd',
          request: {},
          response: {},
          metadata: { m: '1' },
        },
      ]),
    },
    { method: 'GET', path: `/api/v1/endpoint/${enc('GET:/x')}`, query: q({ project_env: PE }), headers: auth },
    {
      method: 'PUT',
      path: `/api/v1/endpoint/${enc('POST:/orders/{id}')}`,
      query: q({ project_env: PE }),
      headers: [...auth, ct],
      body: json({ name: 'orders', description: 'd', metadata: { x: '1' } }),
    },
    {
      method: 'DELETE',
      path: `/api/v1/endpoint/${enc(`GET:/r/${int(1000)}`)}`,
      query: q({ project_env: PE }),
      headers: auth,
    },
    { method: 'GET', path: '/api/v1/encryption-key', query: [], headers: auth },
    { method: 'GET', path: '/api/v1/openapi.json', query: [], headers: [] },
    { method: 'GET', path: '/__emulator/counts', query: [], headers: auth },
    { method: 'DELETE', path: '/__emulator/counts', query: [], headers: auth },
    {
      method: 'POST',
      path: '/__emulator/seed',
      query: [],
      headers: [...auth, ct],
      body: json({
        project: 'fzseed',
        type: 'production',
        url: 'https://seed.example',
        templates: 2,
        clients: 3,
        keysPerClient: 1,
        endpoints: 2,
        metadata: { m: '1' },
      }),
    },
    {
      method: 'POST',
      path: '/__emulator/faults',
      query: [],
      headers: [...auth, ct],
      body: json({ rules: [{ method: 'GET', route: '/project', mode: 'error', status: 503, times: 1 }] }),
    },
  ];
}

// ------------------------------------------------------------------ mutations
const deepText = (n: number) => `${'['.repeat(n)}${']'.repeat(n)}`;
const WEIRD_VALUES: unknown[] = [
  null,
  true,
  false,
  0,
  -1,
  1.5,
  2 ** 31,
  2 ** 53 + 2,
  1e308,
  '',
  ' ',
  'a'.repeat(3000),
  '\u0000',
  '\u202eevil',
  'ü',
  '💥',
  '\ud800',
  '../../etc/passwd',
  '%zz',
  '${env:HOME}',
  '<script>',
  'kmsc_x',
  'sk_test_xxxx',
  [],
  {},
  [[]],
  { __proto__: null, a: 1 },
  ['10.0.0.0/33'],
  '2024-13-45T99:00:00Z',
  'GET',
  'production',
  'not a url',
  'https://x.example',
];
const WEIRD_TEXT = [
  '',
  '{',
  '}',
  'null',
  '[]',
  '"x"',
  '5',
  '{"a":1}{',
  '\uFEFF{}',
  'true',
  '1e999999',
  `{"a":${deepText(5000)}}`,
  deepText(40),
  '{"slug":',
  "{'single':'quotes'}",
  '\u0000\u0001\u0002',
  '{"__proto__":{"polluted":1}}',
  '[{}, {}, {}]',
  'x'.repeat(2000),
];
const PATH_PIECES = [
  '%zz',
  '%',
  '%2',
  '%E0%A4',
  '%FF',
  '%00',
  '%2F',
  '%252F',
  '%C0%AF',
  '..',
  '.',
  '',
  'é',
  '%F0%9F%92%A5',
  'a'.repeat(3000),
  'GET%3A%2Fx',
  'GET:/x',
  '%3A',
  '{client_uuid}',
  ';x=1',
  'templates',
  'logs',
  '__emulator',
];
const QUERY_VALUES = [
  '',
  '%zz',
  '%',
  '%FF',
  '-1',
  '0',
  '1',
  'abc',
  '1.5',
  '9'.repeat(30),
  '1e3',
  'true',
  'maybe',
  '+',
  '%2B',
  'ü',
  '%E2%80%AE',
  'a'.repeat(2000),
];
const QUERY_NAMES = [
  'page',
  'limit',
  'project_env',
  'name',
  'status',
  'kind',
  'envId',
  'templateId',
  'forceDelete',
  'keyId',
  'method_path',
  'methodPath',
  'clientId',
  'type',
  '%zz',
  '',
  'x',
];
const METHODS = [
  'GET',
  'POST',
  'PUT',
  'DELETE',
  'PATCH',
  'HEAD',
  'OPTIONS',
  'TRACE',
  'PROPFIND',
  'PURGE',
  'get',
  'FROB',
  'G ET',
  '',
  'CONNECT',
];

function mutateJson(value: unknown, depth = 0): unknown {
  if (depth > 4 || !value || typeof value !== 'object' || chance(0.25)) return chance(0.5) ? pick(WEIRD_VALUES) : value;
  if (Array.isArray(value)) {
    const copy = [...value];
    const r = int(4);
    if (r === 0 && copy.length) copy.splice(int(copy.length), 1);
    else if (r === 1) copy.push(pick(WEIRD_VALUES));
    else if (copy.length) copy[int(copy.length)] = mutateJson(copy[int(copy.length)], depth + 1);
    if (chance(0.05)) return Array.from({ length: 101 + int(20) }, () => copy[0] ?? {});
    return copy;
  }
  const copy: Record<string, unknown> = { ...(value as Record<string, unknown>) };
  const keys = Object.keys(copy);
  const r = int(4);
  if (r === 0 && keys.length) delete copy[pick(keys)];
  else if (r === 1) copy[pick(['bogus', '__proto__', 'constructor', '', 'id', 'key', 'hash'])] = pick(WEIRD_VALUES);
  else if (keys.length) {
    const k = pick(keys);
    copy[k] = mutateJson(copy[k], depth + 1);
  }
  return copy;
}

function mutate(base: Omit<Req, 'version'>): Req {
  const r: Req = { ...base, query: [...base.query], headers: [...base.headers], version: 'HTTP/1.1' };
  const n = 1 + int(3);
  for (let i = 0; i < n; i++) {
    switch (int(10)) {
      case 0:
        r.method = pick(METHODS);
        break;
      case 1: {
        // path: a piece inserted, a segment replaced or added
        const segs = r.path.split('/');
        const at = 1 + int(Math.max(1, segs.length - 1));
        const piece = pick(PATH_PIECES);
        if (chance(0.4)) segs[at] = piece;
        else if (chance(0.5)) segs.splice(at, 0, piece);
        else segs[at] = `${segs[at] ?? ''}${piece}`;
        r.path = segs.join('/');
        if (chance(0.05))
          r.path = pick(['*', 'api/v1/project', `http://127.0.0.1:${port}${r.path}`, `//${r.path}`, `${r.path}#frag`]);
        break;
      }
      case 2: // query: a value replaced or a parameter added or dropped
        if (r.query.length && chance(0.4)) r.query[int(r.query.length)]![1] = pick(QUERY_VALUES);
        else if (r.query.length && chance(0.3)) r.query.splice(int(r.query.length), 1);
        else r.query.push([pick(QUERY_NAMES), pick(QUERY_VALUES)]);
        break;
      case 3:
      case 4: {
        // body: the JSON mutated, or replaced by other text
        // (A body that is already mutated past JSON, or nested past what stringify handles, is replaced.)
        let next: string | undefined;
        try {
          next =
            r.body !== undefined && chance(0.7)
              ? (JSON.stringify(mutateJson(JSON.parse(r.body))) ?? 'null')
              : undefined;
        } catch {
          next = undefined;
        }
        r.body = next ?? pick(WEIRD_TEXT);
        if (!r.headers.some(([k]) => k === 'Content-Type')) r.headers.push(['Content-Type', 'application/json']);
        break;
      }
      case 5: {
        // credentials
        r.headers = r.headers.filter(([k]) => k !== 'x-api-key');
        const v = pick([
          '',
          'auth-none',
          `Bearer ${API_KEY}`,
          'Bearer',
          'Basic abc',
          `Bearer  ${API_KEY} extra`,
          'sk_test_wrong_key',
          'kmsc_customer',
          'x'.repeat(5000),
        ]);
        if (v.startsWith('Bearer') || v.startsWith('Basic')) r.headers.push(['Authorization', v]);
        else if (v !== 'auth-none') r.headers.push(['x-api-key', v]);
        break;
      }
      case 6: // headers the framing or the parser cares about
        r.headers.push(
          pick<[string, string]>([
            ['Content-Type', 'text/plain'],
            ['Content-Type', 'application/json; charset=latin1'],
            ['Content-Length', 'abc'],
            ['Content-Length', '-1'],
            ['Transfer-Encoding', 'gzip'],
            ['X-Big', 'b'.repeat(17_000)],
            ['X-Ctl', 'a\u0001b'],
            ['Bad Name', 'x'],
            ['Host', 'other.example'],
            ['Expect', '100-continue'],
            ['X-Service-Encrypted', '1'],
            ['Upgrade', 'websocket'],
            ['X-Latin', '\u00e9\u00ff'],
          ]),
        );
        break;
      case 7: // chunked framing (a valid or a broken chunk)
        if (r.body !== undefined) r.chunked = true;
        break;
      case 8:
        r.version = pick(['HTTP/1.0', 'HTTP/2.0', 'HTTP/1.2', 'HTTP/9', '', 'HTTP/1.1 extra', 'http/1.1']);
        break;
      default:
        if (chance(0.5)) r.headers = r.headers.filter(([k]) => k !== 'Content-Type');
        break;
    }
  }
  return r;
}

function wire(r: Req): Buffer {
  const qs = r.query.map(([k, v]) => (v === '' && chance(0.3) ? k : `${k}=${v}`)).join('&');
  const target = `${r.path}${qs ? `${r.path.includes('?') ? '&' : '?'}${qs}` : ''}`;
  const hasHost = !r.headers.some(([k]) => k === 'Host');
  const lines = [
    `${r.method} ${target}${r.version ? ` ${r.version}` : ''}`,
    ...(hasHost && !chance(0.03) ? ['Host: 127.0.0.1'] : []),
    'Connection: close',
  ];
  for (const [k, v] of r.headers) lines.push(`${k}: ${v}`);
  let body = r.body === undefined ? Buffer.alloc(0) : Buffer.from(r.body, 'utf8');
  if (r.body !== undefined && !r.headers.some(([k]) => k === 'Content-Length' || k === 'Transfer-Encoding')) {
    if (r.chunked) {
      lines.push('Transfer-Encoding: chunked');
      const size = chance(0.8) ? body.length.toString(16) : pick(['zz', '-1', 'g', '', '1;ext="x']);
      body = Buffer.concat([Buffer.from(`${size}\r\n`), body, Buffer.from('\r\n0\r\n\r\n')]);
    } else lines.push(`Content-Length: ${body.length}`);
  }
  return Buffer.concat([Buffer.from(`${lines.join('\r\n')}\r\n\r\n`, 'latin1'), body]);
}

// ------------------------------------------------------------------ the run
describe(`HTTP fuzz of the emulator (seed ${SEED}, ${COUNT} requests)`, () => {
  it('answers every mutated request with a 2xx or a 4xx in the error shape; nothing on stderr', async () => {
    await ensureFixture();
    const failures: string[] = [];
    const statuses: Record<number, number> = {};
    for (let i = 0; i < COUNT; i++) {
      if (i % 250 === 0) await ensureFixture();
      const req = mutate(pick(corpus()));
      const bytes = wire(req);
      const show = () => `#${i} ${JSON.stringify(bytes.toString('latin1').slice(0, 300))}`;
      let res: RawResponse;
      try {
        res = await rawExchange(port, bytes, { head: req.method === 'HEAD', timeoutMs: 10_000 });
      } catch (e) {
        failures.push(`${show()} → ${(e as Error).message}`);
        continue;
      }
      statuses[res.status] = (statuses[res.status] ?? 0) + 1;
      // A fault rule the fuzz managed to script is removed before the next request can meet it.
      if (req.path === '/__emulator/faults' && res.status === 200) await send('DELETE', '/__emulator/faults');
      const type = res.headers['content-type'] ?? '';
      if (res.status === 0) failures.push(`${show()} → no answer`);
      else if (res.status >= 500) failures.push(`${show()} → ${res.status} ${res.body.slice(0, 200)}`);
      else if (
        res.status >= 400 &&
        !(type.startsWith('application/json') && (req.method === 'HEAD' || isErrorShape(res.json, res.status)))
      )
        failures.push(`${show()} → ${res.status} not in the error shape: ${type} ${res.body.slice(0, 200)}`);
      else if (
        res.status < 400 &&
        req.method !== 'HEAD' &&
        !type.startsWith('application/yaml') &&
        res.json === undefined
      )
        failures.push(`${show()} → ${res.status} not JSON: ${type} ${res.body.slice(0, 200)}`);
      if (failures.length >= 20) break;
    }
    expect(failures, `seed ${SEED}; statuses ${JSON.stringify(statuses)}`).toEqual([]);
    // The run reached the handlers, not only the parser: real successes and real validation errors.
    expect((statuses[200] ?? 0) + (statuses[201] ?? 0)).toBeGreaterThan(COUNT / 20);
    expect(statuses[400] ?? 0).toBeGreaterThan(COUNT / 10);
    expect(emulator.stderr()).toBe('');
  });

  it("leaves a state that still reads: every project, and every environment's lists", async () => {
    const projects: { slug: string; envs: { list: { project_env: string }[] } }[] = [];
    for (let page = 1; ; page++) {
      const res = await send('GET', `/api/v1/project?limit=100&page=${page}`);
      expect(res.status, res.body).toBe(200);
      const body = res.json as { data: typeof projects; pagination: { pages: number } };
      expect(Array.isArray(body.data) && typeof body.pagination.pages === 'number').toBe(true);
      projects.push(...body.data);
      if (page >= body.pagination.pages) break;
    }
    expect(projects.length).toBeGreaterThan(1);
    for (const p of projects) {
      for (const e of p.envs.list) {
        expect((await send('GET', `/api/v1/project/${e.project_env}`)).status).toBe(200);
        for (const list of ['/client', '/client/templates', '/endpoint', `/project/${e.project_env}/logs`]) {
          const res = await send('GET', `/api/v1${list}?project_env=${e.project_env}&limit=100`);
          expect(res.status, `${list} ${e.project_env}: ${res.body.slice(0, 200)}`).toBe(200);
        }
      }
    }
    expect(emulator.stderr()).toBe('');
  });
});
