// The service client over real HTTP: retries only where safe, Retry-After honoured, ambiguous
// writes surfaced, pages fetched concurrently, list items lacking fields completed with a get.
import { createServer, request as httpRequest, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { KmsClient } from '../../src/api/client.js';
import {
  AmbiguousWriteError,
  ApiError,
  HttpTransport,
  NetworkError,
  RequestsStoppedError,
} from '../../src/api/http.js';
import { startEmulator, type RunningEmulator } from '../../src/emulator/index.js';
import { clientFingerprint, fingerprint, readLiveState } from '../../src/live/read.js';
import { skipTest } from '../support/skip.js';
import { patient } from '../support/patience.js';

const API_KEY = 'sk_test_transport01234';
let emu: RunningEmulator;

const client = (extra: Partial<ConstructorParameters<typeof KmsClient>[0] & object> = {}) =>
  new KmsClient({ baseUrl: emu.url, apiKey: API_KEY, baseDelayMs: 5, maxDelayMs: 2000, ...extra });

beforeAll(async () => {
  emu = await startEmulator({ port: 0, apiKeys: [API_KEY] });
  emu.service.seed({ project: 'big', type: 'production', templates: 2, clients: 450, keysPerClient: 1, endpoints: 3 });
});
afterAll(async () => emu?.close());

describe('HTTP transport', () => {
  it('reaches a service at an IPv6 literal address (http://[::1]:port)', async (ctx) => {
    let v6: RunningEmulator;
    try {
      v6 = await startEmulator({ port: 0, host: '::1', apiKeys: [API_KEY] });
    } catch (e) {
      return skipTest(ctx, `no IPv6 loopback on this machine (${(e as Error).message})`);
    }
    try {
      expect(v6.url).toMatch(/^http:\/\/\[::1\]:\d+\//);
      v6.service.seed({ project: 'six', type: 'production', templates: 1, clients: 1, keysPerClient: 1, endpoints: 0 });
      const api = new KmsClient({ baseUrl: v6.url, apiKey: API_KEY, baseDelayMs: 5 });
      expect((await api.listProjects()).map((p) => p.slug)).toEqual(['six']);
      await api.close();
    } finally {
      await v6.close();
    }
  });

  it('sends a read again at once, without a retry line, when the server closed the kept-alive connection it went out on; a write stays of unknown outcome', async () => {
    // The server drops the connection when the second request arrives on it, as a server whose
    // idle timeout fires just as the client reuses the connection does.
    let seen = 0;
    const perSocket = new WeakMap<object, number>();
    const server: Server = createServer((req, res) => {
      seen++;
      const n = (perSocket.get(req.socket) ?? 0) + 1;
      perSocket.set(req.socket, n);
      if (n === 2) return req.socket.destroy();
      res.writeHead(200, { 'content-type': 'application/json' }).end('{"ok":true}');
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const retries: string[] = [];
    const http = new HttpTransport({
      baseUrl: `http://127.0.0.1:${(server.address() as AddressInfo).port}/api/v1`,
      apiKey: API_KEY,
      parallelism: 1,
      baseDelayMs: 5,
      onRetry: (r) => retries.push(r.reason),
    });
    try {
      const get = { method: 'GET' as const, path: '/thing', kind: 'get thing' };
      expect(await http.request(get)).toEqual({ ok: true });
      expect(await http.request(get)).toEqual({ ok: true });
      expect(seen).toBe(3);
      expect(retries).toEqual([]);
      // A create sent on a connection dropped the same way may have been processed: never sent again.
      expect(await http.request(get)).toEqual({ ok: true });
      await expect(
        http.request({ method: 'POST', path: '/thing', kind: 'create thing', body: { a: 1 } }),
      ).rejects.toBeInstanceOf(AmbiguousWriteError);
    } finally {
      await http.close();
      await new Promise((r) => server.close(r));
    }
  });

  it('retries a GET on 503 and succeeds, counting each attempt', async () => {
    const api = client();
    emu.addFault({ method: 'GET', route: '/project', mode: 'error', status: 503, times: 2 });
    const projects = await api.listProjects();
    expect(projects.map((p) => p.slug)).toEqual(['big']);
    expect(api.http.requestCounts['list projects']).toBe(3);
    await api.close();
  });

  it('honours Retry-After on 429, even for a create (a 429 was not processed)', async () => {
    const api = client();
    emu.addFault({ method: 'POST', route: '/endpoint', mode: '429', retryAfterSeconds: 1 });
    const started = performance.now();
    const created = await api.createEndpoints('big-production', [{ method: 'GET', path: '/after-429' }]);
    expect(performance.now() - started).toBeGreaterThanOrEqual(950);
    expect(created[0]!.path).toBe('/after-429');
    await api.close();
  });

  it('retries a create answered 503 (not processed, like 429); never one whose outcome is unknown (500, a dropped connection)', async () => {
    const api = client();
    emu.addFault({ method: 'POST', route: '/endpoint', mode: 'error', status: 503 });
    await api.createEndpoints('big-production', [{ method: 'GET', path: '/x503' }]);
    emu.addFault({ method: 'POST', route: '/endpoint', mode: 'error', status: 500 });
    await expect(api.createEndpoints('big-production', [{ method: 'GET', path: '/x500' }])).rejects.toBeInstanceOf(
      AmbiguousWriteError,
    );
    emu.addFault({ method: 'POST', route: '/endpoint', mode: 'drop-after-commit' });
    await expect(api.createEndpoints('big-production', [{ method: 'GET', path: '/dropped' }])).rejects.toBeInstanceOf(
      AmbiguousWriteError,
    );
    // The dropped create did take effect; the 500 one did not: only re-reading tells.
    const paths = (await api.listEndpoints('big-production')).map((e) => e.path);
    expect(paths).toContain('/x503');
    expect(paths).toContain('/dropped');
    expect(paths).not.toContain('/x500');
    expect(api.http.requestCounts['create endpoints']).toBe(4);
    await api.close();
  });

  it('does not retry a client error and reports the service message', async () => {
    const api = client();
    const err = await api.getClient('nope', 'big-production').catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ApiError);
    expect((err as ApiError).status).toBe(404);
    expect((err as ApiError).message).toContain("client 'nope' not found");
    expect(api.http.requestCounts['get client']).toBe(1);
    await api.close();
  });

  it('gives up on an unreachable service with a clear error', async () => {
    const api = new KmsClient({
      baseUrl: 'http://127.0.0.1:1/api/v1',
      apiKey: API_KEY,
      baseDelayMs: 1,
      maxAttempts: 2,
    });
    await expect(api.listProjects()).rejects.toBeInstanceOf(NetworkError);
    await api.close();
  });

  it('reads all pages at limit=100, the pages after the first concurrently', async () => {
    emu.resetCounts();
    const api = client({ parallelism: 8 });
    const clients = await api.listClients('big-production');
    expect(clients).toHaveLength(450);
    expect(new Set(clients.map((c) => c.id)).size).toBe(450);
    expect(emu.counts()['GET /client']).toBe(5);
    await api.close();
  });

  it("keeps its connections' worth of a list's pages in flight, no more, asks for each once, and none after a page failed", async () => {
    const asked: number[] = [];
    let inFlight = 0;
    let most = 0;
    let failAt = 0;
    // Pages 2-5 are answered once all four are in: they are asked for together (or the test times out).
    const barrier: (() => void)[] = [];
    const server = createServer((req, res) => {
      const page = Number(new URL(req.url ?? '/', 'http://x').searchParams.get('page'));
      asked.push(page);
      most = Math.max(most, ++inFlight);
      const answer = () => {
        inFlight--;
        const [status, body] =
          page === failAt
            ? [404, { code: 'NOT_FOUND', error: 'gone' }]
            : [
                200,
                {
                  data: [{ id: `c${page}`, name: `n${page}` }],
                  pagination: { total: 30, page, limit: 100, pages: 30 },
                },
              ];
        res.writeHead(status, { 'content-type': 'application/json' });
        res.end(JSON.stringify(body));
      };
      if (failAt || page < 2 || page > 5) return answer();
      barrier.push(answer);
      if (barrier.length === 4) for (const go of barrier.splice(0)) go();
    });
    await new Promise<void>((ok) => server.listen(0, '127.0.0.1', ok));
    const api = new KmsClient({
      baseUrl: `http://127.0.0.1:${(server.address() as AddressInfo).port}/api/v1`,
      apiKey: API_KEY,
      parallelism: 1,
    });
    try {
      const slots = api.http.readSlots;
      expect(slots).toBe(4);
      const clients = await api.listClients('big-production');
      expect(clients.map((c) => c.name)).toEqual(Array.from({ length: 30 }, (_, i) => `n${i + 1}`));
      // Sent in page order; they may arrive in another over four connections.
      expect(asked.sort((a, b) => a - b)).toEqual(Array.from({ length: 30 }, (_, i) => i + 1));
      expect(most).toBe(slots);

      asked.length = 0;
      failAt = 10;
      await expect(api.listClients('big-production')).rejects.toThrow(ApiError);
      // A request sent now waits behind any page still to be asked for (the transport's slots are
      // handed out in order): the pages in flight beside the failed one end, no other is asked for.
      await api.http.request({ method: 'GET', path: '/client', query: { page: 0 } });
      expect(asked.splice(asked.indexOf(0), 1)).toEqual([0]);
      expect(asked.length).toBeLessThan(10 + slots);
      expect(new Set(asked).size).toBe(asked.length);
    } finally {
      await api.close();
      await new Promise((ok) => server.close(ok));
    }
  });

  it('stop() and close() cut the exchanges on the wire: each fails at once as stopped, none sent again', async () => {
    // Answers the first requests of each transport, then holds every later one without an answer.
    let arrived = 0;
    let answered = 0;
    const held: ServerResponse[] = [];
    let onHeld = () => {};
    const server = createServer((_req, res) => {
      arrived++;
      if (answered < 3) {
        answered++;
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end('{}');
        return;
      }
      held.push(res);
      onHeld();
    });
    await new Promise<void>((ok) => server.listen(0, '127.0.0.1', ok));
    const baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}/api/v1`;
    try {
      for (const end of [(t: HttpTransport) => t.stop(), (t: HttpTransport) => void t.close()]) {
        arrived = 0;
        answered = 0;
        const tp = new HttpTransport({ baseUrl, apiKey: API_KEY, parallelism: 2, timeoutMs: 120_000 });
        // Slots taken and let go first, then three exchanges held on the wire.
        for (let i = 0; i < 3; i++) await tp.request({ method: 'GET', path: '/x', query: { i } });
        const allHeld = new Promise<void>((ok) => {
          onHeld = () => held.length === 3 && ok();
        });
        const pending = [0, 1, 2].map((i) => tp.request({ method: 'GET', path: '/y', query: { i } }));
        await allHeld;
        end(tp);
        for (const p of pending) await expect(p).rejects.toThrow(RequestsStoppedError);
        expect(arrived).toBe(6);
        for (const res of held.splice(0)) res.destroy();
        await tp.close();
      }
    } finally {
      await new Promise((ok) => server.close(ok));
    }
  });

  it('decodes answers as UTF-8: non-ASCII text, split across socket reads, arrives whole', async () => {
    // ~300 KB, so the body comes in several chunks and multi-byte characters straddle some of them.
    const names = Array.from({ length: 100 }, (_, i) => `café-✓-🔑-${i}-${'é'.repeat(1000)}`);
    const body = JSON.stringify({
      data: names.map((name, i) => ({
        id: `id-${i}`,
        name,
        keys: [],
        metadata: { note: name },
        ipWhitelist: [],
        templateId: null,
      })),
      pagination: { total: 100, page: 1, limit: 100, pages: 1 },
    });
    const server = createServer((_req, res) => {
      res.writeHead(200, { 'content-type': 'application/json; charset=utf-8' });
      res.end(body);
    });
    await new Promise<void>((ok) => server.listen(0, '127.0.0.1', ok));
    try {
      const api = new KmsClient({
        baseUrl: `http://127.0.0.1:${(server.address() as AddressInfo).port}/api/v1`,
        apiKey: API_KEY,
      });
      const clients = await api.listClients('any-production');
      expect(clients.map((c) => c.name)).toEqual(names);
      expect(clients.map((c) => (c.metadata as { note: string }).note)).toEqual(names);
      await api.close();
    } finally {
      await new Promise<void>((ok) => server.close(() => ok()));
    }
  });

  it("starts an environment's lists beside its project read, and a list failing meanwhile fails the read (no unhandled rejection)", async () => {
    // The project read answers 1 s late (scaled to the load): the lists, started from the project
    // list, are done before it.
    const delay = patient(1000);
    emu.addFault({ method: 'GET', route: '/project/{project_env}', mode: 'delay', delayMs: delay, times: 1 });
    const api = client();
    const firstPageAt: number[] = [];
    api.onPageRead = (p) => {
      if (p.page === 1 && p.kind !== 'list projects') firstPageAt.push(performance.now());
    };
    const started = performance.now();
    const live = await readLiveState(api, { projects: ['big'], envs: ['big-production'] });
    expect(live.state.clients).toHaveLength(450);
    expect(live.state.endpoints.length).toBeGreaterThanOrEqual(3);
    // Each key as the service lists it, its fields in the model's order (the fingerprint's fast path needs it).
    const key = live.state.clients[0]!.keys[0]!;
    expect(Object.keys(key)).toEqual(['id', 'name', 'expiresAt', 'autoRotate', 'createdAt']);
    expect(key.createdAt).toMatch(/^\d{4}-\d\d-\d\dT/);
    expect(clientFingerprint(live.state.clients[0]!)).toBe(fingerprint(live.state.clients[0]!));
    // Both first pages (clients, endpoints) arrived while the project read was still delayed: its
    // answer came `delay` after it was sent, at the earliest (a margin under it instead failed when
    // this process stalled: at 800 ms, a first page came at 949 ms after an 850 ms stall).
    expect(firstPageAt).toHaveLength(2);
    for (const at of firstPageAt) expect(at - started).toBeLessThan(delay);
    await api.close();

    // A client list refused while the project read is delayed: the read fails with that error.
    emu.addFault({ method: 'GET', route: '/project/{project_env}', mode: 'delay', delayMs: 300, times: 1 });
    emu.addFault({ method: 'GET', route: '/client', mode: 'error', status: 400, times: 1 });
    const failing = client();
    await expect(readLiveState(failing, { projects: ['big'], envs: ['big-production'] })).rejects.toThrow(ApiError);
    await failing.close();
  });

  it('keeps to --max-rps', async () => {
    const api = client({ maxRps: 20 });
    const started = performance.now();
    await Promise.all(Array.from({ length: 30 }, () => api.listTemplates('big-production')));
    // A burst of 20, then 10 more at 20/s: at least ~0.5 s.
    expect(performance.now() - started).toBeGreaterThanOrEqual(450);
    await api.close();
  });
});

describe('tolerant reading', () => {
  let proxy: Server;
  let proxyUrl: string;
  beforeAll(async () => {
    // A service whose list items omit keys and metadata and add unknown fields: the reader must
    // complete those clients with a get and ignore what it does not know.
    const upstream = new URL(emu.url);
    proxy = createServer((req, res) => {
      const fwd = httpRequest(
        { host: upstream.hostname, port: upstream.port, path: req.url, method: req.method, headers: req.headers },
        (up) => {
          const chunks: Buffer[] = [];
          up.on('data', (c: Buffer) => chunks.push(c));
          up.on('end', () => {
            let body = Buffer.concat(chunks).toString('utf8');
            if (req.url?.startsWith(`${upstream.pathname}/client?`) && up.statusCode === 200) {
              const page = JSON.parse(body);
              page.data = page.data.map((c: Record<string, unknown>, i: number) => {
                const { keys: _k, metadata: _m, ...rest } = c;
                return i % 2 === 0 ? { ...rest, futureField: { nested: true } } : { ...c, futureField: 1 };
              });
              body = JSON.stringify(page);
            }
            res.writeHead(up.statusCode ?? 500, { 'content-type': 'application/json' });
            res.end(body);
          });
        },
      );
      req.pipe(fwd);
    });
    await new Promise<void>((ok) => proxy.listen(0, '127.0.0.1', ok));
    proxyUrl = `http://127.0.0.1:${(proxy.address() as AddressInfo).port}${upstream.pathname}`;
  });
  afterAll(() => new Promise<void>((ok) => proxy.close(() => ok())));

  it('completes list items that lack fields the diff needs with a get', async () => {
    const api = new KmsClient({ baseUrl: proxyUrl, apiKey: API_KEY });
    const live = await readLiveState(api, { projects: ['big'], envs: ['big-production'] });
    expect(live.state.clients).toHaveLength(450);
    expect(live.state.clients.every((c) => c.keys.length === 1 && c.metadata.index !== undefined)).toBe(true);
    expect(api.http.requestCounts['get client']).toBe(225);
    await api.close();
  });
});
