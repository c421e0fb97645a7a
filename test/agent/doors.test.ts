// The agent's HTTP doors as a network peer meets them (issue 35), against `kms-sync agent` as a
// real process: a write needs a bearer token (a browser's cached basic auth is not enough), JSON,
// and no sign of another site; a name the agent does not know in Host (DNS rebinding) gets nothing
// without the token; /metrics and /api/status follow --expose; /api/status does not show the
// state folder; a non-loopback --listen without a token is refused at start.
import { writeFileSync } from 'node:fs';
import { request } from 'node:http';
import { describe, expect, it } from 'vitest';
import { kmsSync } from '../crash/lib.js';
import { JSON_BODY, sharedFixture, startAgent, until, type Fixture } from './lib.js';
import { patient } from '../support/patience.js';

const TOKEN = 'doors-test-ui-token-0123456789abcdef';
const BEARER = { authorization: `Bearer ${TOKEN}` };
const BASIC = { authorization: `Basic ${Buffer.from(`operator:${TOKEN}`).toString('base64')}` };

/** One request with exactly these headers (fetch cannot set Host). */
function raw(
  url: string,
  method: string,
  path: string,
  headers: Record<string, string> = {},
  body?: string,
): Promise<{ status: number; text: string }> {
  return new Promise((resolve, reject) => {
    const req = request(
      `${url}${path}`,
      {
        method,
        headers: { ...headers, ...(body !== undefined ? { 'content-length': String(Buffer.byteLength(body)) } : {}) },
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, text: Buffer.concat(chunks).toString('utf8') }));
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}

describe("the agent's doors", () => {
  let f: Fixture;
  sharedFixture(
    (x) => {
      f = x;
    },
    [TOKEN],
  );

  it(
    'without a token, on loopback: writes need JSON and the same origin, and a rebinding Host gets nothing',
    async () => {
      const agent = await startAgent(f, ['--path', 'kms', '--interval', '1h']);
      try {
        await until(agent, 'the first reconcile', (s) => s.reconciles >= 1, 60_000);
        const host = new URL(agent.url).host;
        const suspended = async () => (await agent.status()).agent.suspended as boolean;
        // A form's content types, or none: refused.
        for (const type of [
          undefined,
          'application/x-www-form-urlencoded',
          'text/plain',
          'multipart/form-data; boundary=x',
        ]) {
          expect(
            (await raw(agent.url, 'POST', '/api/suspend', type ? { 'content-type': type } : {}, 'a=b')).status,
            String(type),
          ).toBe(415);
        }
        // What a browser adds to a request another site makes it send: refused.
        expect(
          (await raw(agent.url, 'POST', '/api/suspend', { ...JSON_BODY, 'sec-fetch-site': 'cross-site' }, '{}')).status,
        ).toBe(403);
        expect(
          (await raw(agent.url, 'POST', '/api/suspend', { ...JSON_BODY, 'sec-fetch-site': 'same-site' }, '{}')).status,
        ).toBe(403);
        expect(
          (await raw(agent.url, 'POST', '/api/suspend', { ...JSON_BODY, origin: 'http://evil.example' }, '{}')).status,
        ).toBe(403);
        expect((await raw(agent.url, 'POST', '/api/suspend', { ...JSON_BODY, origin: 'null' }, '{}')).status).toBe(403);
        expect(
          (
            await raw(
              agent.url,
              'POST',
              '/api/suspend',
              { ...JSON_BODY, origin: `http://localhost:${new URL(agent.url).port}` },
              '{}',
            )
          ).status,
        ).toBe(403);
        // DNS rebinding: the attacker's name in Host, the agent's address underneath.
        const rebound = { host: `rebind.evil.example:${new URL(agent.url).port}` };
        const status = await raw(agent.url, 'GET', '/api/status', rebound);
        expect(status.status).toBe(403);
        expect(status.text).toMatch(/unknown Host "rebind\.evil\.example"/);
        expect((await raw(agent.url, 'GET', '/', rebound)).status).toBe(403);
        expect((await raw(agent.url, 'GET', '/metrics', rebound)).status).toBe(403);
        expect((await raw(agent.url, 'POST', '/api/suspend', { ...rebound, ...JSON_BODY }, '{}')).status).toBe(403);
        expect(await suspended()).toBe(false);
        // Probes answer any Host (kubelet sends the pod's address); localhost and IP addresses are known.
        expect((await raw(agent.url, 'GET', '/healthz', rebound)).status).toBe(200);
        expect(
          (await raw(agent.url, 'GET', '/api/status', { host: `localhost:${new URL(agent.url).port}` })).status,
        ).toBe(200);
        // The agent's own page: same origin, JSON.
        const ok = await raw(
          agent.url,
          'POST',
          '/api/suspend',
          { ...JSON_BODY, origin: `http://${host}`, 'sec-fetch-site': 'same-origin' },
          '{}',
        );
        expect(ok.status, ok.text).toBe(200);
        expect(await suspended()).toBe(true);
        expect((await raw(agent.url, 'POST', '/api/resume', JSON_BODY, '{}')).status).toBe(200);
        expect(await suspended()).toBe(false);
        // The state folder is nobody's business over HTTP.
        const s = await agent.status();
        expect(s.agent.stateDir).toBeUndefined();
        expect(JSON.stringify(s)).not.toContain(f.stateDir);
      } finally {
        agent.child.kill('SIGTERM');
        await agent.exit;
      }
    },
    patient(120_000),
  );

  it(
    'with a token: writes need it as a bearer header, reads take it as bearer or basic, --expose and --allowed-host open what they name',
    async () => {
      const agent = await startAgent(f, [
        '--path',
        'kms',
        '--interval',
        '1h',
        '--ui-token',
        'file:' + tokenFile(f),
        '--expose',
        'metrics',
        '--allowed-host',
        'kms-sync-agent.example.com',
      ]);
      try {
        const status = async () => JSON.parse((await raw(agent.url, 'GET', '/api/status', BEARER)).text);
        const port = new URL(agent.url).port;
        // Writes: no credential, basic auth (what a browser caches and replays), a wrong token: refused.
        expect((await raw(agent.url, 'POST', '/api/suspend', JSON_BODY, '{}')).status).toBe(401);
        const basic = await raw(agent.url, 'POST', '/api/suspend', { ...JSON_BODY, ...BASIC }, '{}');
        expect(basic.status).toBe(401);
        expect(basic.text).toMatch(/Bearer/);
        expect(
          (await raw(agent.url, 'POST', '/api/suspend', { ...JSON_BODY, authorization: `Bearer ${TOKEN}x` }, '{}'))
            .status,
        ).toBe(401);
        expect(
          (await raw(agent.url, 'POST', '/api/suspend', { ...BEARER, 'content-type': 'text/plain' }, '{}')).status,
        ).toBe(415);
        expect((await status()).agent.suspended).toBe(false);
        // The bearer token: accepted under any Host name (a rebinding page cannot know it).
        expect(
          (
            await raw(
              agent.url,
              'POST',
              '/api/suspend',
              { ...JSON_BODY, ...BEARER, host: `agent.internal:${port}` },
              '{}',
            )
          ).status,
        ).toBe(200);
        expect((await status()).agent.suspended).toBe(true);
        expect((await raw(agent.url, 'POST', '/api/resume', { ...JSON_BODY, ...BEARER }, '{}')).status).toBe(200);
        // The page behind a proxy that ends TLS: its origin is https with the agent's host, the same origin.
        const proxied = {
          ...JSON_BODY,
          ...BEARER,
          host: 'kms-sync-agent.example.com',
          'sec-fetch-site': 'same-origin',
        };
        expect(
          (
            await raw(
              agent.url,
              'POST',
              '/api/suspend',
              { ...proxied, origin: 'https://kms-sync-agent.example.com' },
              '{}',
            )
          ).status,
        ).toBe(200);
        expect(
          (await raw(agent.url, 'POST', '/api/resume', { ...proxied, origin: 'https://evil.example' }, '{}')).status,
        ).toBe(403);
        expect(
          (
            await raw(
              agent.url,
              'POST',
              '/api/resume',
              { ...proxied, origin: 'https://kms-sync-agent.example.com' },
              '{}',
            )
          ).status,
        ).toBe(200);
        // Reads: the page and the status need the token (bearer or the basic-auth password); /metrics is exposed.
        expect((await raw(agent.url, 'GET', '/api/status')).status).toBe(401);
        expect((await raw(agent.url, 'GET', '/')).status).toBe(401);
        expect((await raw(agent.url, 'GET', '/', BASIC)).status).toBe(200);
        expect((await raw(agent.url, 'GET', '/metrics')).status).toBe(200);
        // An exposed read still refuses an unknown Host, and answers an --allowed-host name.
        expect((await raw(agent.url, 'GET', '/metrics', { host: `rebind.evil.example:${port}` })).status).toBe(403);
        expect((await raw(agent.url, 'GET', '/metrics', { host: `KMS-SYNC-AGENT.example.com:${port}` })).status).toBe(
          200,
        );
      } finally {
        agent.child.kill('SIGTERM');
        await agent.exit;
      }
    },
    patient(120_000),
  );

  it(
    'refuses at start: a non-loopback --listen without a token, a short token, an unknown --expose',
    async () => {
      const run = async (args: string[], env: Record<string, string> = {}) => {
        const p = kmsSync(['agent', '--repo', f.repo.url, '--state-dir', f.stateDir, ...args], {
          cwd: f.root,
          env: { PATH: process.env.PATH, HOME: f.root, KMS_API_URL: f.emu.url, KMS_API_KEY: 'sk_test_doors', ...env },
          sink: f.outputs,
        });
        return { code: await p.exit, out: p.output() };
      };
      const open = await run(['--listen', '0.0.0.0:0']);
      expect(open.code).toBe(1);
      expect(open.out).toMatch(/--listen 0\.0\.0\.0:0 is reachable from other machines.*--ui-token file:PATH/);
      expect(open.out).not.toMatch(/listening on/);
      expect((await run(['--listen', ':0'])).code).toBe(1);
      const short = await run(['--listen', '127.0.0.1:0', '--ui-token', 'env:T'], { T: 'short' });
      expect(short.code).toBe(1);
      expect(short.out).toMatch(/too short/);
      expect((await run(['--listen', '127.0.0.1:0', '--expose', 'metrics,secrets'])).out).toMatch(
        /--expose secrets: expected metrics, status/,
      );
    },
    patient(120_000),
  );
});

function tokenFile(f: Fixture): string {
  const file = `${f.root}/ui-token`;
  writeFileSync(file, `${TOKEN}\n`, { mode: 0o600 });
  return file;
}
