// What a careless or hostile client sends gets a 4xx in the documented `{code, status, error}`
// shape: bad percent-encoding, requests Node's HTTP parser rejects (seen over a raw socket),
// CONNECT, bad control-route bodies. Never a 500, never a warning (stack) from the emulator,
// never a state that stops answering.
import { readFileSync, rmSync } from 'node:fs';
import { connect } from 'node:net';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { startEmulator, type RunningEmulator } from '../../src/emulator/index.js';
import { assertMatchesContract, matchPathTemplate } from '../support/contract.js';
import { isErrorShape, rawExchange, requestBytes, type RawResponse } from './raw-http.js';
import { scratchDir } from '../support/scratch.js';

const API_KEY = 'sk_test_robustness';
const PE = 'rb-production';
let emu: RunningEmulator;
let dir: string;
let dataFile: string;
/** Warnings the emulator emits (it reports internal errors, with their stack, as process warnings). */
const warnings: string[] = [];
const onWarning = (w: Error) => warnings.push(`${w.name}: ${w.message}`);

beforeAll(async () => {
  process.on('warning', onWarning);
  dir = scratchDir('kms-robust-');
  dataFile = join(dir, 'state.json');
  emu = await startEmulator({ port: 0, apiKeys: [API_KEY], dataFile, control: true });
  const res = await api('POST', '/project', {
    slug: 'rb',
    name: 'Robust',
    envs: [{ type: 'production', url: 'https://rb.example', templates: [{ name: 'basic', rateLimitDay: 100 }] }],
  });
  expect(res.status).toBe(201);
});
afterAll(async () => {
  process.off('warning', onWarning);
  await emu?.close();
  rmSync(dir, { recursive: true, force: true });
});
afterEach(() => {
  expect(warnings, 'the emulator reported an internal error').toEqual([]);
});

async function api(method: string, path: string, body?: unknown, headers: Record<string, string> = {}) {
  const res = await fetch(`${emu.url}${path}`, {
    method,
    headers: { 'x-api-key': API_KEY, 'content-type': 'application/json', ...headers },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  return { status: res.status, headers: res.headers, json: text ? JSON.parse(text) : undefined };
}

/** A raw request to the emulator (key included unless `auth: false`). */
function raw(
  method: string,
  target: string,
  opts: { body?: string; headers?: Record<string, string>; auth?: boolean } = {},
) {
  const headers = {
    ...(opts.auth === false ? {} : { 'x-api-key': API_KEY }),
    ...(opts.body !== undefined ? { 'Content-Type': 'application/json' } : {}),
    ...opts.headers,
  };
  return rawExchange(emu.port, requestBytes(method, target, headers, opts.body));
}

/** The answer is a JSON error of this status and code, in the contract's shape where the route is documented. */
function expectErrorAnswer(res: RawResponse, status: number, code: string, message?: RegExp) {
  expect({ status: res.status, code: (res.json as { code?: string })?.code }, res.raw.slice(0, 400)).toEqual({
    status,
    code,
  });
  expect(res.headers['content-type']).toMatch(/^application\/json/);
  expect(isErrorShape(res.json, status), res.body).toBe(true);
  if (message) expect((res.json as { error: string }).error).toMatch(message);
}

async function projectListStillReadable() {
  const list = await api('GET', '/project');
  expect(list.status).toBe(200);
  assertMatchesContract('GET', '/project', 200, list.json);
  return list.json as { data: { slug: string }[]; pagination: { total: number } };
}

describe('request targets', () => {
  it('bad percent-encoding in a path parameter is a 400 INVALID_URL in the contract shape, not a 500', async () => {
    for (const [target, template] of [
      [`/api/v1/client/%zz?project_env=${PE}`, '/client/{client_uuid}'],
      ['/api/v1/project/%E0%A4', '/project/{project_env}'],
      [`/api/v1/endpoint/GET%3A%2F%?project_env=${PE}`, '/endpoint/{method_path}'],
    ] as const) {
      const res = await raw('GET', target);
      expectErrorAnswer(res, 400, 'INVALID_URL', /the path/);
      expect(matchPathTemplate(target)).toBe(template);
      assertMatchesContract('GET', template, 400, res.json);
    }
    expectErrorAnswer(await raw('GET', '/api/v1/client/%zz?project_env=x'), 400, 'INVALID_URL', /"%zz"/);
    expectErrorAnswer(await raw('GET', '/api/v1/project/%E0%A4'), 400, 'INVALID_URL', /not valid UTF-8/);
    // Outside any route, and on a write: the same answer.
    expectErrorAnswer(await raw('GET', '/%'), 400, 'INVALID_URL');
    expectErrorAnswer(await raw('DELETE', `/api/v1/client/a%2?project_env=${PE}`), 400, 'INVALID_URL');
  });

  it('bad percent-encoding in the query names the parameter', async () => {
    const res = await raw('GET', '/api/v1/client?project_env=%zz');
    expectErrorAnswer(res, 400, 'INVALID_URL', /query parameter "project_env"/);
    assertMatchesContract('GET', '/client', 400, res.json);
    expectErrorAnswer(await raw('GET', '/api/v1/project?%FF=1'), 400, 'INVALID_URL', /query parameter name/);
  });

  it('well-formed encodings still work: absolute-form targets, + as space, encoded method_path', async () => {
    const abs = await raw('GET', `http://127.0.0.1:${emu.port}/api/v1/project?name=Rob`);
    expect(abs.status).toBe(200);
    expect((abs.json as { data: { slug: string }[] }).data.map((p) => p.slug)).toEqual(['rb']);
    const spaced = await raw('GET', '/api/v1/project?name=no+such+name');
    expect((spaced.json as { data: unknown[] }).data).toEqual([]);
    const created = await api('POST', `/endpoint?project_env=${PE}`, { method: 'GET', path: '/ä/{id}' });
    expect(created.status).toBe(201);
    const got = await raw('GET', `/api/v1/endpoint/${encodeURIComponent('GET:/ä/{id}')}?project_env=${PE}`);
    expect(got.status).toBe(200);
    expect(got.json).toMatchObject({ method_path: 'GET:/ä/{id}' });
  });

  it('a target that is not a path ("*", a bare word) is a 400', async () => {
    expectErrorAnswer(await raw('OPTIONS', '*'), 400, 'INVALID_URL', /starting with/);
    // The parser itself refuses a bare word.
    expectErrorAnswer(await raw('GET', 'api/v1/project'), 400, 'BAD_REQUEST', /starts with \//);
  });

  it('page numbers past 2^31-1 are a 400, not a page that JSON cannot carry', async () => {
    const res = await raw('GET', `/api/v1/client?project_env=${PE}&page=${'9'.repeat(400)}`);
    expectErrorAnswer(res, 400, 'VALIDATION_ERROR', /page/);
    assertMatchesContract('GET', '/client', 400, res.json);
  });

  it('a body nested deeper than 32 levels is refused; the state stays readable', async () => {
    const templateId = (await api('GET', `/client/templates?project_env=${PE}`)).json.data[0].id;
    // Written as text: JSON.stringify itself would overflow the stack on such a value.
    const deep = `${'{"d":'.repeat(5000)}"x"${'}'.repeat(5000)}`;
    const res = await raw('POST', `/api/v1/client?project_env=${PE}`, {
      body: `{"name":"deep","templateId":${JSON.stringify(templateId)},"metadata":${deep}}`,
    });
    expectErrorAnswer(res, 400, 'VALIDATION_ERROR', /body: nests deeper than 32 levels/);
    const list = await api('GET', `/client?project_env=${PE}`);
    expect(list.status).toBe(200);
    expect(list.json.data.map((c: { name: string }) => c.name)).not.toContain('deep');
  });

  it('a header named __proto__ in a validation body is a plain header, not a way to smuggle a key', async () => {
    const templateId = (await api('GET', `/client/templates?project_env=${PE}`)).json.data[0].id;
    const client = (
      await api('POST', `/client?project_env=${PE}`, { name: 'proto', templateId, keys: [{ name: 'k' }] })
    ).json;
    const key = client.keys[0].key as string;
    const check = async (headers: string) =>
      (
        await fetch(`${emu.url}/client/${client.id}?project_env=${PE}&method_path=GET:/x`, {
          method: 'POST',
          headers: { 'x-api-key': API_KEY, 'content-type': 'application/json' },
          body: `{"headers":${headers}}`,
        })
      ).json() as Promise<{ success: boolean; reason?: string }>;
    expect(await check(JSON.stringify({ 'x-api-key': key }))).toMatchObject({ success: true });
    expect(await check(`{"__proto__":{"x-api-key":${JSON.stringify(key)}}}`)).toMatchObject({
      success: false,
      reason: 'KEY_NOT_FOUND',
    });
  });
});

describe('requests the HTTP parser rejects, over a raw socket', () => {
  const cases: [string, string | Buffer, number, string][] = [
    ['a malformed request line', 'GARBAGE\r\n\r\n', 400, 'BAD_REQUEST'],
    [
      'a lower-case method (methods are case-sensitive)',
      'get /api/v1/project HTTP/1.1\r\nHost: x\r\n\r\n',
      405,
      'METHOD_NOT_ALLOWED',
    ],
    ['an unknown method', 'FROB /api/v1/project HTTP/1.1\r\nHost: x\r\n\r\n', 405, 'METHOD_NOT_ALLOWED'],
    ['an unknown method on an unknown path', 'FROB /api/v1/nothing HTTP/1.1\r\nHost: x\r\n\r\n', 404, 'NOT_FOUND'],
    ['a space in the target', 'GET /api/v1/pro ject HTTP/1.1\r\nHost: x\r\n\r\n', 400, 'BAD_REQUEST'],
    ['a raw non-ASCII target', Buffer.from('GET /api/v1/projé HTTP/1.1\r\nHost: x\r\n\r\n'), 400, 'BAD_REQUEST'],
    ['no HTTP version (HTTP/0.9)', 'GET /api/v1/project\r\nHost: x\r\n\r\n', 400, 'BAD_REQUEST'],
    ['HTTP/2.0 in an HTTP/1 request line', 'GET /api/v1/project HTTP/2.0\r\nHost: x\r\n\r\n', 400, 'BAD_REQUEST'],
    ['HTTP/1.2', 'GET /api/v1/project HTTP/1.2\r\nHost: x\r\n\r\n', 400, 'BAD_REQUEST'],
    [
      '20 KB of headers',
      `GET /api/v1/project HTTP/1.1\r\nHost: x\r\nX-Big: ${'a'.repeat(20_000)}\r\n\r\n`,
      431,
      'HEADERS_TOO_LARGE',
    ],
    [
      'a control character in a header name',
      'GET /api/v1/project HTTP/1.1\r\nHost: x\r\nX\u0001Y: 1\r\n\r\n',
      400,
      'BAD_REQUEST',
    ],
    [
      'Content-Length with Transfer-Encoding',
      'POST /api/v1/project HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n',
      400,
      'BAD_REQUEST',
    ],
    [
      'two different Content-Lengths',
      'POST /api/v1/project HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\n{}',
      400,
      'BAD_REQUEST',
    ],
    [
      'a malformed chunk size',
      `POST /api/v1/project HTTP/1.1\r\nHost: x\r\nx-api-key: ${API_KEY}\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n{}\r\n0\r\n\r\n`,
      400,
      'BAD_REQUEST',
    ],
    [
      'a bad chunk after a good one (the handler is already reading)',
      `POST /api/v1/project HTTP/1.1\r\nHost: x\r\nx-api-key: ${API_KEY}\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{"\r\nzz\r\n`,
      400,
      'BAD_REQUEST',
    ],
    ['the HTTP/2 preface', 'PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n', 400, 'BAD_REQUEST'],
    ['HTTP/1.1 without Host', 'GET /api/v1/project HTTP/1.1\r\n\r\n', 400, 'BAD_REQUEST'],
  ];
  for (const [what, bytes, status, code] of cases) {
    it(`${what} → ${status} ${code}, JSON, connection closed`, async () => {
      const res = await rawExchange(emu.port, bytes);
      expectErrorAnswer(res, status, code);
      expect(res.headers.connection).toBe('close');
    });
  }

  it('CONNECT is answered 405 with the error shape (the emulator is not a proxy)', async () => {
    const res = await rawExchange(emu.port, 'CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n');
    expectErrorAnswer(res, 405, 'METHOD_NOT_ALLOWED', /not a proxy/);
    expect(res.headers.allow).toBeDefined();
  });

  it('a client that disconnects mid-body leaves nothing behind', async () => {
    await new Promise<void>((done) => {
      const socket = connect(emu.port, '127.0.0.1', () => {
        socket.write(
          `POST /api/v1/project HTTP/1.1\r\nHost: x\r\nx-api-key: ${API_KEY}\r\nContent-Length: 500\r\n\r\n{"slug":"half`,
        );
        setTimeout(() => {
          socket.destroy();
          done();
        }, 50);
      });
    });
    await new Promise((ok) => setTimeout(ok, 50));
    expect((await projectListStillReadable()).data.map((p) => p.slug)).not.toContain('half');
  });

  it('the emulator keeps serving after all of them', async () => {
    await projectListStillReadable();
  });
});

describe('control routes', () => {
  const control = (method: string, route: string, body?: string, auth = true) =>
    rawExchange(
      emu.port,
      requestBytes(
        method,
        `/__emulator${route}`,
        { ...(auth ? { 'x-api-key': API_KEY } : {}), 'Content-Type': 'application/json' },
        body,
      ),
    );

  it('are off unless the emulator is started with them, and say how to turn them on', async () => {
    const plain = await startEmulator({ port: 0, apiKeys: [API_KEY] });
    try {
      for (const [method, route, body] of [
        ['GET', '/counts'],
        ['POST', '/seed', '{"project":"x","type":"production","clients":3}'],
        ['POST', '/faults', '{"mode":"error"}'],
      ] as const) {
        const res = await rawExchange(
          plain.port,
          requestBytes(method, `/__emulator${route}`, { 'x-api-key': API_KEY }, body),
        );
        expectErrorAnswer(res, 404, 'NOT_FOUND', /--control/);
      }
      const list = await fetch(`${plain.url}/project`, { headers: { 'x-api-key': API_KEY } });
      expect(((await list.json()) as { data: unknown[] }).data).toEqual([]);
    } finally {
      await plain.close();
    }
  });

  it('need the project key; unknown routes 404, wrong methods 405 with Allow', async () => {
    expectErrorAnswer(await control('GET', '/counts', undefined, false), 401, 'UNAUTHORIZED');
    expectErrorAnswer(
      await control('POST', '/seed', '{"project":"nokey","type":"production"}', false),
      401,
      'UNAUTHORIZED',
    );
    expectErrorAnswer(
      await rawExchange(emu.port, requestBytes('GET', '/__emulator/counts', { 'x-api-key': 'sk_test_wrongwrong' })),
      401,
      'INVALID_API_KEY',
    );
    expectErrorAnswer(await control('GET', '/nothing'), 404, 'NOT_FOUND');
    const wrong = await control('PUT', '/seed', '{}');
    expectErrorAnswer(wrong, 405, 'METHOD_NOT_ALLOWED');
    expect(wrong.headers.allow).toBe('POST');
    expect((await projectListStillReadable()).data.map((p) => p.slug)).toEqual(['rb']);
  });

  it('a bad seed is refused whole: nothing applied, nothing written, GET /project keeps answering', async () => {
    const fileBefore = readFileSync(dataFile, 'utf8');
    const before = await projectListStillReadable();
    for (const [body, message] of [
      ['{}', /body\.project: is required/],
      ['null', /must be a JSON object, got null/],
      ['[]', /must be a JSON object, got array/],
      ['5', /must be a JSON object/],
      ['{"project":"bad slug","type":"production"}', /body\.project/],
      ['{"project":"big","type":"production","clients":1000000000}', /body\.clients: must be <= 200000/],
      ['{"project":"big","type":"production","templates":0}', /body\.templates: must be >= 1/],
      ['{"project":"big","type":"production","clients":-1}', /body\.clients/],
      ['{"project":"big","type":"production","clients":"3"}', /body\.clients: must be integer/],
      ['{"project":"big","type":"prod-uction"}', /body\.type/],
      ['{"project":"big","type":"production","metadata":[]}', /body\.metadata/],
      ['{"project":"big","type":"production","bogus":true}', /body\.bogus: unknown field/],
      ['{"project":"big","type":"production"', /not valid JSON/],
      ['', /empty/],
    ] as const) {
      const res = await control('POST', '/seed', body);
      expect(res.status, body).toBe(400);
      expect(isErrorShape(res.json, 400), res.body).toBe(true);
      expect((res.json as { error: string }).error, body).toMatch(message);
    }
    const after = await projectListStillReadable();
    expect(after).toEqual(before);
    expect(readFileSync(dataFile, 'utf8')).toBe(fileBefore);
  });

  it('a valid seed loads an environment and is saved', async () => {
    const res = await control(
      'POST',
      '/seed',
      JSON.stringify({
        project: 'seeded',
        type: 'production',
        templates: 2,
        clients: 30,
        keysPerClient: 1,
        endpoints: 3,
      }),
    );
    expect(res.status).toBe(200);
    expect(res.json).toEqual({ project_env: 'seeded-production', templates: 2, clients: 30, endpoints: 3 });
    const clients = await api('GET', '/client?project_env=seeded-production&limit=100');
    expect(clients.json.pagination.total).toBe(30);
    expect(readFileSync(dataFile, 'utf8')).toContain('"client-00029"');
  });

  it('bad fault rules are refused whole: none becomes active', async () => {
    const valid = { method: 'GET', route: '/project', mode: 'error', status: 503 };
    for (const [body, message] of [
      ['null', /body: must be a JSON object, got null/],
      ['{"rules":5}', /body\.rules: must be array/],
      ['{"rules":[]}', /body\.rules: must have at least 1/],
      [JSON.stringify({ rules: [valid, { ...valid, mode: 'explode' }] }), /body\.rules\[1\]\.mode/],
      [
        JSON.stringify({ rules: [valid, { ...valid, route: '/nope' }] }),
        /body\.rules\[1\]\.route: "\/nope" is not a route template/,
      ],
      [JSON.stringify({ ...valid, times: 0 }), /body\.times: must be >= 1/],
      [JSON.stringify({ ...valid, method: 'PATCH' }), /body\.method/],
      [JSON.stringify({ mode: 'delay', delayMs: 10_000_000 }), /body\.delayMs: must be <= 600000/],
      [JSON.stringify({ mode: '429', status: 500 }), /body\.status: only applies to mode "error"/],
      [JSON.stringify({ ...valid, rules: [] }), /body\.method: unknown field/],
    ] as const) {
      const res = await control('POST', '/faults', body);
      expect(res.status, body).toBe(400);
      expect(isErrorShape(res.json, 400), res.body).toBe(true);
      expect((res.json as { error: string }).error, body).toMatch(message);
    }
    // Nothing was scripted: the project list answers normally.
    await projectListStillReadable();
  });

  it('valid fault rules apply to the next matching requests, and can be cleared', async () => {
    const res = await control(
      'POST',
      '/faults',
      JSON.stringify({ rules: [{ method: 'GET', route: '/project', mode: 'error', status: 503, times: 2 }] }),
    );
    expect(res.json).toEqual({ success: true, active: 1 });
    expect((await api('GET', '/project')).status).toBe(503);
    expect((await control('DELETE', '/faults')).status).toBe(200);
    await projectListStillReadable();
    // Every mode is accepted with its own options (the crash campaign scripts delay-after-commit).
    const all = await control(
      'POST',
      '/faults',
      JSON.stringify({
        rules: [
          { method: 'POST', route: '/client', mode: 'delay-after-commit', delayMs: 600, times: 3 },
          { method: 'PUT', route: '/client/{client_uuid}', mode: 'drop-after-commit' },
          { method: 'GET', route: '/client', mode: '429', retryAfterSeconds: 0 },
          { route: '/endpoint/{method_path}', mode: 'delay', delayMs: 0 },
          { mode: 'drop' },
        ],
      }),
    );
    expect(all.json).toEqual({ success: true, active: 5 });
    expect((await control('DELETE', '/faults')).status).toBe(200);
    await projectListStillReadable();
    const counts = await control('GET', '/counts');
    expect((counts.json as Record<string, number>)['GET /project']).toBeGreaterThan(0);
  });
});
