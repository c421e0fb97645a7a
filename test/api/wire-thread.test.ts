// The transport's wire thread (src/api/wire-thread.ts): a long list's reads are made on a thread of
// their own once it has started, and nothing else changes. In-process through the built modules
// (dist/api/: the thread starts from its compiled entry), then through the built CLI: a plan's
// text, JSON, Markdown and saved plan, its exit code and its requests are those of the same plan
// with the thread switched off (KMS_SYNC_WIRE_THREAD=0), on a random fleet of several pages an
// environment.
import { once } from 'node:events';
import { writeFileSync } from 'node:fs';
import { createServer, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type * as ClientModule from '../../src/api/client.js';
import type * as HttpModule from '../../src/api/http.js';
import { startEmulator, type RunningEmulator } from '../../src/emulator/index.js';
import { allOutput, RAW_KEY_PATTERN, repoRoot } from '../support/cli.js';
import { randomFleet } from '../support/fleet.js';
import { patient } from '../support/patience.js';
import { comparable, planRun } from '../support/plan-run.js';
import { scratchDir } from '../support/scratch.js';

const API_KEY = 'sk_test_wire0123456789';
let emu: RunningEmulator;
// The built modules (loaded at run time, typed by their sources): the thread starts from dist/api/wire-worker.js.
const built = (file: string) => import(pathToFileURL(path.join(repoRoot, 'dist', 'api', file)).href);
const { KmsClient } = (await built('client.js')) as typeof ClientModule;
const { ApiError, RequestsStoppedError } = (await built('http.js')) as typeof HttpModule;
type KmsClient = InstanceType<typeof KmsClient>;

beforeAll(async () => {
  emu = await startEmulator({ port: 0, apiKeys: [API_KEY] });
  emu.service.seed({ project: 'wire', type: 'production', templates: 2, clients: 450, keysPerClient: 1, endpoints: 0 });
});
afterAll(async () => {
  await emu?.close();
  for (const text of allOutput) expect(text).not.toMatch(RAW_KEY_PATTERN);
});
afterEach(() => {
  delete process.env.KMS_SYNC_WIRE_THREAD;
});

/**
 * Lists the 450 clients (5 pages) once: with KMS_SYNC_WIRE_THREAD=1 the thread is made with the
 * list's second page, and every read from then on goes to it (waiting for its start).
 */
async function untilOnThread(api: KmsClient) {
  await api.listClients('wire-production');
  expect(api.http.wireReads).toBe(4);
}

/** Reads the list with the thread on (=1) or off (=0): the list, the reads sent, and those made on the thread. */
async function readList(setting: '0' | '1') {
  process.env.KMS_SYNC_WIRE_THREAD = setting;
  const api = new KmsClient({ baseUrl: emu.url, apiKey: API_KEY, parallelism: 8 });
  try {
    if (setting === '1') await untilOnThread(api);
    const before = api.http.wireReads;
    emu.resetCounts();
    const list = await api.listClients('wire-production');
    return { list, sent: emu.counts()['GET /client'], onThread: api.http.wireReads - before };
  } finally {
    await api.close();
  }
}

describe('the wire thread', () => {
  it('reads a list of several pages as this thread does: the same items in the same order, each page asked once', async () => {
    const off = await readList('0');
    const on = await readList('1');
    expect(off.onThread).toBe(0);
    expect(on.onThread).toBe(5);
    expect(on.list).toHaveLength(450);
    expect(new Set(on.list.map((c) => c.id)).size).toBe(450);
    expect(on.list).toEqual(off.list);
    expect(on.sent).toBe(off.sent);
    expect(on.sent).toBe(5);
  });

  it('carries what a retry and an error need: a 503 retried, a 404 with the service message', async () => {
    process.env.KMS_SYNC_WIRE_THREAD = '1';
    const api = new KmsClient({ baseUrl: emu.url, apiKey: API_KEY, baseDelayMs: 5, maxDelayMs: 50 });
    try {
      await untilOnThread(api);
      const before = api.http.wireReads;
      emu.addFault({ method: 'GET', route: '/client', mode: 'error', status: 503, times: 2 });
      expect(await api.listClients('wire-production')).toHaveLength(450);
      expect(api.http.wireReads).toBe(before + 7);
      await expect(api.http.request({ method: 'GET', path: '/client/no-such-client' })).rejects.toThrow(ApiError);
      expect(api.http.wireReads).toBe(before + 8);
    } finally {
      await api.close();
    }
  });

  it('stop() and close() cut the reads on the thread: each fails at once as stopped, none sent again', async () => {
    process.env.KMS_SYNC_WIRE_THREAD = '1';
    // Answers a list of three pages, then holds every request (the three of `held`) without an answer.
    const held: ServerResponse[] = [];
    const asked: string[] = [];
    let allHeld = () => {};
    const server = createServer((req, res) => {
      const url = new URL(req.url ?? '/', 'http://x');
      asked.push(url.pathname);
      if (url.pathname.endsWith('/held')) {
        if (held.push(res) === 3) allHeld();
        return;
      }
      const page = Number(url.searchParams.get('page'));
      const pagination = { total: 3, page, limit: 100, pages: 3 };
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ data: [{ id: `c${page}`, name: `n${page}` }], pagination }));
    });
    server.listen(0, '127.0.0.1');
    await once(server, 'listening');
    const { port } = server.address() as AddressInfo;
    try {
      for (const how of ['stop', 'close'] as const) {
        const api = new KmsClient({ baseUrl: `http://127.0.0.1:${port}/api/v1`, apiKey: API_KEY, parallelism: 2 });
        await api.listClients('x-production');
        expect(api.http.wireReads).toBe(2);
        asked.length = 0;
        const holding = new Promise<void>((ok) => {
          allHeld = ok;
        });
        const pending = [0, 1, 2].map((i) => api.http.request({ method: 'GET', path: '/held', query: { i } }));
        await holding;
        expect(api.http.wireReads).toBe(5);
        if (how === 'stop') api.http.stop();
        else void api.http.close();
        // Each rejection comes in a message of its own: every expectation is attached at once.
        await Promise.all(pending.map((p) => expect(p).rejects.toThrow(RequestsStoppedError)));
        expect(asked).toHaveLength(3);
        for (const res of held.splice(0)) res.destroy();
        await api.close();
      }
    } finally {
      server.close();
      await once(server, 'close');
    }
  });

  it(
    'a plan reading its lists on the thread prints what it prints without, on a random fleet of several pages an environment',
    async () => {
      let onThread = 0;
      let withOps = 0;
      const dir = scratchDir();
      writeFileSync(
        path.join(dir, 'kms-sync.yaml'),
        randomFleet(1, 'w1', (req) => emu.service.seed(req), 250),
      );
      const runs = [
        ['plan', '-f', '.', '--out', 'plan.json', '--detailed-exitcode', '--no-secret-check'],
        ['plan', '-f', '.', '--json', '--prune', '--no-secret-check'],
        ['plan', '-f', '.', '--format', 'markdown', '--no-secret-check'],
      ];
      for (const args of runs) {
        const off = await planRun(emu, API_KEY, dir, args, 'off', { KMS_SYNC_WIRE_THREAD: '0' });
        const on = await planRun(emu, API_KEY, dir, args, 'on', { KMS_SYNC_WIRE_THREAD: '1' });
        const what = args.join(' ');
        // wireMs: from the thread's start to its first read (none when no read went there).
        expect(off.phases.wireMs, what).toBeUndefined();
        if (on.phases.wireMs !== undefined) onThread++;
        expect(comparable(on.r, on.saved), what).toEqual(comparable(off.r, off.saved));
        expect(on.requests, what).toBe(off.requests);
        if (args.includes('--out') && off.r.code === 2) withOps++;
      }
      expect(onThread).toBe(3);
      expect(withOps).toBeGreaterThan(0);
    },
    patient(120_000),
  );
});
