// The client against answers a real service never gives but a wrong URL, a proxy or a broken
// network do: a 200 HTML login page, a list without its envelope, a create that answers `{}`,
// a name that does not resolve, a refused connection. Each is an error naming the request (no
// credentials); none is read as "nothing there" (that would plan mass creates, and with prune, deletes).
import type { LookupFunction } from 'node:net';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { KmsClient } from '../../src/api/client.js';
import { AmbiguousWriteError, ApiError, NetworkError, UnexpectedResponseError } from '../../src/api/http.js';
import { startEmulator, type RunningEmulator } from '../../src/emulator/index.js';
import { readLiveState } from '../../src/live/read.js';
import { collectUsage } from '../../src/live/usage.js';
import { emptyLiveState, type LiveState } from '../../src/model/index.js';

const usageState: LiveState = {
  ...emptyLiveState(),
  envs: [{ id: 'e1', project: 'shop', projectEnv: 'shop-production', type: 'production' }],
};
import { runCli, workspace } from '../support/cli.js';

const API_KEY = 'sk_test_badanswers0123';
const PE = 'shop-production';

/** What the bad server answers: status, content type and body per `METHOD /path` (or per query), else 404 JSON. */
type Answer = { status?: number; type?: string; body: string };
let answers: Record<string, Answer | ((query: URLSearchParams) => Answer)> = {};
let server: Server;
let baseUrl: string;

function serve(req: IncomingMessage, res: ServerResponse) {
  const [rawPath, query] = (req.url ?? '').split('?') as [string, string | undefined];
  const path = rawPath.replace(/^\/api\/v1/, '');
  req.resume();
  req.on('end', () => {
    const entry = answers[`${req.method} ${path}`];
    const a = typeof entry === 'function' ? entry(new URLSearchParams(query)) : entry;
    if (!a) {
      res.writeHead(404, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ code: 'NOT_FOUND', status: 404, error: `no ${path}` }));
      return;
    }
    res.writeHead(a.status ?? 200, a.type === '' ? {} : { 'content-type': a.type ?? 'application/json' });
    res.end(a.body);
  });
}

const LOGIN_PAGE =
  '<!DOCTYPE html>\n<html><head><title>Sign in</title></head><body>\u001b[2J Please sign in</body></html>';
const json = (v: unknown): Answer => ({ body: JSON.stringify(v) });
const page = (data: unknown[]) => json({ data, pagination: { total: data.length, page: 1, limit: 100, pages: 1 } });

beforeAll(async () => {
  server = createServer(serve);
  await new Promise<void>((ok) => server.listen(0, '127.0.0.1', ok));
  baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}/api/v1`;
});
afterAll(() => new Promise<void>((ok) => server.close(() => ok())));

const client = (extra: Partial<ConstructorParameters<typeof KmsClient>[0] & object> = {}) =>
  new KmsClient({ baseUrl, apiKey: API_KEY, baseDelayMs: 1, maxDelayMs: 5, ...extra });

async function failure(p: Promise<unknown>): Promise<Error> {
  const e = await p.then(
    () => undefined,
    (err: unknown) => err,
  );
  if (!(e instanceof Error)) throw new Error('expected the call to fail');
  expect(e.message).not.toContain(API_KEY);
  return e;
}

describe('a 2xx answer that is not JSON', () => {
  it('a 200 HTML login page names the request and the content type, and is not retried', async () => {
    answers = { 'GET /project': { type: 'text/html; charset=utf-8', body: LOGIN_PAGE } };
    const api = client();
    const e = await failure(api.listProjects());
    expect(e).toBeInstanceOf(UnexpectedResponseError);
    expect(e.message).toContain('GET /api/v1/project?page=1&limit=100 → 200');
    expect(e.message).toContain('content type text/html instead of application/json');
    expect(e.message).toContain(baseUrl);
    expect(e.message).not.toContain('DOCTYPE');
    expect(api.http.requestCounts['list projects']).toBe(1);
    await api.close();
  });

  it('JSON declared but not delivered, and no content type with a non-JSON body', async () => {
    answers = {
      'GET /client/c1': { body: '<html>oops</html>' },
      'GET /client/c2': { type: '', body: 'plain text' },
    };
    const api = client();
    const declared = await failure(api.getClient('c1', PE));
    expect(declared.message).toMatch(
      /GET \/api\/v1\/client\/c1\?project_env=shop-production → 200: the answer says application\/json but its body is not valid JSON/,
    );
    const none = await failure(api.getClient('c2', PE));
    expect(none.message).toMatch(/has no content type but its body is not valid JSON/);
    await api.close();
  });

  it('an error status with an HTML body is reported by content type, with control characters escaped', async () => {
    answers = { 'GET /project': { status: 403, type: 'text/html', body: LOGIN_PAGE } };
    const api = client();
    const e = await failure(api.listProjects());
    expect(e).toBeInstanceOf(ApiError);
    expect(e.message).toContain('GET /project → 403 HTTP_403: a text/html answer: <!DOCTYPE html>');
    expect(e.message).not.toContain('\u001b');
    await api.close();
  });

  it('a write answered with HTML may have happened: it is ambiguous, never a success', async () => {
    answers = { 'POST /client': { status: 201, type: 'text/html', body: LOGIN_PAGE } };
    const api = client();
    const e = await failure(api.createClients(PE, [{ name: 'a', templateId: 't' }]));
    expect(e).toBeInstanceOf(AmbiguousWriteError);
    expect(e.message).toContain('POST /client: outcome unknown (the 201 answer has content type text/html');
    await api.close();
  });
});

describe('list answers without the documented envelope are errors, never "nothing there"', () => {
  const lists: [string, string, (api: KmsClient) => Promise<unknown>][] = [
    ['list projects', '/project', (api) => api.listProjects()],
    ['list templates', '/client/templates', (api) => api.listTemplates(PE)],
    ['list clients', '/client', (api) => api.listClients(PE)],
    ['list endpoints', '/endpoint', (api) => api.listEndpoints(PE)],
    ['list logs', `/project/${PE}/logs`, (api) => api.listLogs(PE, {})],
    // The drift report's usage context reads endpoint stats through its own paging loop.
    [
      'usage: endpoint stats',
      '/endpoint',
      (api) => collectUsage(api, usageState, [{ address: `endpoint.${PE}/GET:/a`, kind: 'endpoint', projectEnv: PE }]),
    ],
  ];
  const wrong: [string, Answer, RegExp][] = [
    ['{}', json({}), /expected the list envelope \{data: \[\.\.\.\], pagination\}, got an empty object \{\}/],
    ['a bare array', json([]), /got an array of 0/],
    ['data without pagination', json({ data: [] }), /got an object with keys \[data\]/],
    ['data that is not an array', json({ data: {}, pagination: { pages: 1 } }), /expected the list envelope/],
    [
      'pagination without pages or total',
      json({ data: [], pagination: { page: 1 } }),
      /pagination has 'pages' or 'total'/,
    ],
    ['a billion pages', json({ data: [], pagination: { pages: 1e9, total: 1e11 } }), /more than the 100000 pages/],
    ['an empty body', { body: '' }, /got an empty body/],
    ['null', json(null), /got null/],
  ];
  for (const [kind, path, call] of lists) {
    it(`${kind}: each wrong shape names the request`, async () => {
      const api = client();
      for (const [what, answer, message] of wrong) {
        answers = { [`GET ${path}`]: answer };
        const e = await failure(call(api));
        expect(e, what).toBeInstanceOf(UnexpectedResponseError);
        expect(e.message.startsWith(`GET /api/v1${path}`), e.message).toBe(true);
        expect(e.message, what).toMatch(/^GET \S+ → 200: the answer is not the documented shape: /);
        expect(e.message, what).toMatch(message);
      }
      await api.close();
    });
  }

  it('list items without their identity are errors (a client without an id cannot be matched)', async () => {
    const api = client();
    answers = { 'GET /client': page([{ id: 'c1', name: 'a' }, { name: 'b' }]) };
    expect((await failure(api.listClients(PE))).message).toMatch(
      /data\[1\]: expected a client with a string 'id' or 'client_uuid'/,
    );
    answers = { 'GET /client/templates': page(['std']) };
    expect((await failure(api.listTemplates(PE))).message).toMatch(/data\[0\]: expected a template, got a string/);
    answers = { 'GET /endpoint': page([{ method: 'GET' }]) };
    expect((await failure(api.listEndpoints(PE))).message).toMatch(
      /data\[0\]: expected an endpoint with a string 'path'/,
    );
    answers = { 'GET /project': page([{ name: 'no slug' }]) };
    expect((await failure(api.listProjects())).message).toMatch(/data\[0\]: expected a project with a string 'slug'/);
    // A later page is checked as strictly as the first.
    const first = json({ data: [{ id: 'c1', name: 'a' }], pagination: { total: 150, page: 1, limit: 100, pages: 2 } });
    answers = { 'GET /client': (q) => (q.get('page') === '1' ? first : json({})) };
    expect((await failure(api.listClients(PE))).message).toMatch(
      /GET \/api\/v1\/client\?project_env=shop-production&page=2&limit=100 → 200: .*got an empty object/,
    );
    await api.close();
  });

  it('gets: a project or client answer of the wrong shape is an error', async () => {
    const api = client();
    answers = { [`GET /project/${PE}`]: json({}) };
    expect((await failure(api.getProject(PE))).message).toMatch(
      /GET \/api\/v1\/project\/shop-production → 200: .*expected a project with a string 'slug', got an empty object/,
    );
    answers = { [`GET /project/${PE}`]: json({ slug: 'shop', envs: { list: 'x' } }) };
    expect((await failure(api.getProject(PE))).message).toMatch(/'envs' is \{count, list: \[\.\.\.\]\}/);
    answers = { 'GET /client/c1': json([]) };
    expect((await failure(api.getClient('c1', PE))).message).toMatch(/expected a client, got an array of 0/);
    await api.close();
  });

  it('a create answered with the wrong shape is ambiguous (the raw keys were in that answer)', async () => {
    const api = client();
    answers = { 'POST /client': { status: 201, body: '{}' } };
    const e = await failure(api.createClients(PE, [{ name: 'a', templateId: 't', keys: [{ name: 'k' }] }]));
    expect(e).toBeInstanceOf(AmbiguousWriteError);
    expect(e.message).toMatch(/expected an array of 1, got an empty object/);
    answers = { 'POST /client': { status: 201, body: JSON.stringify([{ id: 'x', name: 'a' }]) } };
    expect((await failure(api.createClients(PE, [{ name: 'a', templateId: 't' }]))).message).toMatch(
      /\[0\]: expected a client with its 'keys' array/,
    );
    answers = { 'POST /endpoint': { status: 201, body: JSON.stringify([{ method: 'GET', path: '/a' }]) } };
    expect(
      (
        await failure(
          api.createEndpoints(PE, [
            { method: 'GET', path: '/a' },
            { method: 'GET', path: '/b' },
          ]),
        )
      ).message,
    ).toMatch(/expected an array of 2 \(one per item sent\), got 1/);
    await api.close();
  });

  it('the live reader stops on a 200 {} instead of reading an empty service', async () => {
    answers = {
      'GET /project': page([{ slug: 'shop', envs: { count: 1, list: [{ project_env: PE }] } }]),
      [`GET /project/${PE}`]: json({ slug: 'shop', envs: { count: 1, list: [{ project_env: PE, templates: [] }] } }),
      'GET /client/templates': page([]),
      'GET /client': json({}),
      'GET /endpoint': page([]),
    };
    const api = client();
    const e = await failure(readLiveState(api, { projects: ['shop'], envs: [PE] }));
    expect(e.message).toContain(`GET /api/v1/client?project_env=${PE}&page=1&limit=100 → 200`);
    await api.close();
  });
});

describe('plan against a URL that answers 200 {}', () => {
  it('exits 1 naming the request; nothing is planned for creation', async () => {
    answers = { 'GET /project': json({}) };
    const dir = workspace({
      'kms.yaml': `apiVersion: kms-sync/v1
projects:
  - slug: shop
    name: Shop
    environments:
      - type: production
        url: https://shop.example
        templates: [{ name: std, rateLimitDay: 10 }]
        clients: [{ name: a, template: std }]
`,
    });
    const res = await runCli(['plan', '-f', 'kms.yaml'], {
      cwd: dir,
      env: { KMS_API_URL: baseUrl, KMS_API_KEY: API_KEY },
    });
    expect(res.code).toBe(1);
    expect(res.stderr).toContain('GET /api/v1/project?page=1&limit=100 → 200: the answer is not the documented shape');
    expect(`${res.stdout}${res.stderr}`).not.toMatch(/to create|\n\s+at /);
    expect(res.stderr).not.toContain(API_KEY);
  });
});

describe('network failures', () => {
  /** A resolver that fails with `code` and counts its calls. */
  const failingLookup = (code: string) => {
    const calls = { n: 0 };
    const lookup: LookupFunction = (hostname, _options, callback) => {
      calls.n++;
      const err = Object.assign(new Error(`getaddrinfo ${code} ${hostname}`), {
        code,
        hostname,
        syscall: 'getaddrinfo',
      });
      process.nextTick(() => (callback as (e: NodeJS.ErrnoException) => void)(err));
    };
    return { lookup, calls };
  };

  it('a name that does not resolve (ENOTFOUND) is reported once, not retried five times', async () => {
    const { lookup, calls } = failingLookup('ENOTFOUND');
    const api = new KmsClient({
      baseUrl: 'http://kms.example.invalid/api/v1',
      apiKey: API_KEY,
      baseDelayMs: 1,
      lookup,
    });
    const e = await failure(api.listProjects());
    expect(e).toBeInstanceOf(NetworkError);
    expect((e as NetworkError).code).toBe('ENOTFOUND');
    expect(e.message).toContain(
      "the service host 'kms.example.invalid' does not resolve (DNS: no such name; not retried)",
    );
    expect(e.message).toContain('http://kms.example.invalid/api/v1');
    expect(calls.n).toBe(1);
    expect(api.http.requestCounts['list projects']).toBe(1);
    await api.close();
  });

  it('a resolver that did not answer (EAI_AGAIN) is transient: retried, then reported', async () => {
    const { lookup, calls } = failingLookup('EAI_AGAIN');
    const api = new KmsClient({
      baseUrl: 'http://kms.example.invalid/api/v1',
      apiKey: API_KEY,
      baseDelayMs: 1,
      maxAttempts: 3,
      lookup,
    });
    const e = await failure(api.listProjects());
    expect((e as NetworkError).code).toBe('EAI_AGAIN');
    expect(e.message).toContain("the name server did not answer for 'kms.example.invalid' after 3 attempts");
    expect(calls.n).toBe(3);
    await api.close();
  });

  it('a refused connection names the URL', async () => {
    const closed = createServer();
    await new Promise<void>((ok) => closed.listen(0, '127.0.0.1', ok));
    const port = (closed.address() as AddressInfo).port;
    await new Promise<void>((ok) => closed.close(() => ok()));
    const api = new KmsClient({
      baseUrl: `http://127.0.0.1:${port}/api/v1`,
      apiKey: API_KEY,
      baseDelayMs: 1,
      maxAttempts: 2,
    });
    const e = await failure(api.listProjects());
    expect(e).toBeInstanceOf(NetworkError);
    expect(e.message).toBe(
      `GET /api/v1/project?page=1&limit=100: connection refused by http://127.0.0.1:${port} after 2 attempts: is the service running at http://127.0.0.1:${port}/api/v1? (see docs/troubleshooting.md#connection-refused)`,
    );
    await api.close();
  });
});

describe('the real emulator passes every shape check', () => {
  let emu: RunningEmulator;
  beforeAll(async () => {
    emu = await startEmulator({ port: 0, apiKeys: [API_KEY] });
    emu.service.seed({
      project: 'shop',
      type: 'production',
      templates: 2,
      clients: 150,
      keysPerClient: 1,
      endpoints: 2,
    });
  });
  afterAll(async () => emu?.close());

  it('reads, creates and updates through the checked paths', async () => {
    const api = new KmsClient({ baseUrl: emu.url, apiKey: API_KEY });
    const live = await readLiveState(api, { projects: ['shop'], envs: [PE] });
    expect(live.state.clients).toHaveLength(150);
    const templateId = live.state.templates[0]!.id;
    const [created] = await api.createClients(PE, [{ name: 'new', templateId, keys: [{ name: 'k' }] }]);
    expect(created!.keys![0]!.key).toMatch(/^kmsc_/);
    const updated = await api.updateClient(created!.id!, PE, { keys: [{ name: 'k2' }] });
    expect(updated.keys).toHaveLength(2);
    expect(await api.createEndpoints(PE, [{ method: 'GET', path: '/n' }])).toHaveLength(1);
    expect((await api.listLogs(PE, {})).data).toEqual([]);
    await api.close();
  });
});
