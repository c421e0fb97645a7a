// Issue 26 item 5: a pull request's configuration declares the stores `plan` checks. Store
// credentials must never travel over plain HTTP to anything but this machine, and a PR plan can be
// told to contact no remote store at all (KMS_SYNC_PLAN_STORES). Mounted against the built CLI
// with a logging HTTP server as the "other host" (on a non-loopback address of this machine).
import { rmSync, writeFileSync } from 'node:fs';
import { createServer, type IncomingHttpHeaders } from 'node:http';
import type { AddressInfo } from 'node:net';
import { networkInterfaces } from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { runCli } from '../support/cli.js';
import { setup, smallConfig } from './helpers.js';
import { skipWhen } from '../support/skip.js';
import { startEndlessServer } from '../support/endless-server.js';
import { patient } from '../support/patience.js';

const VAULT_TOKEN = 'hvs.' + 'V4ultT0ken'.repeat(3);
const AWS_SECRET = 'aws' + 'S3cretAcc3ss'.repeat(3);
const cleanup: (() => unknown)[] = [];
afterEach(async () => {
  for (const c of cleanup.splice(0)) await c();
});

/** An IPv4 address of this machine that is not loopback (the "other host"), if it has one. */
const external = Object.values(networkInterfaces())
  .flat()
  .find((i) => i && i.family === 'IPv4' && !i.internal)?.address;

async function loggingServer(host: string) {
  const requests: { url: string; headers: IncomingHttpHeaders }[] = [];
  const server = createServer((req, res) => {
    requests.push({ url: req.url ?? '', headers: req.headers });
    res.writeHead(404, { 'content-type': 'application/json' }).end('{"errors":[]}');
  });
  await new Promise<void>((r) => server.listen(0, host, r));
  cleanup.push(
    () =>
      new Promise((r) => {
        server.closeAllConnections();
        server.close(r);
      }),
  );
  return { hostPort: `${host}:${(server.address() as AddressInfo).port}`, requests };
}

/** Keys applied into the local store, then a "pull request" that moves the default store to `uri`. */
async function prWithStore(uri: string, allowedHost?: string) {
  const s = await setup();
  cleanup.push(
    () => s.emu.close(),
    () => rmSync(s.dir, { recursive: true, force: true }),
  );
  const policy = allowedHost ? { KMS_SYNC_STORE_HOSTS: allowedHost } : {};
  const cli = (args: string[], env: NodeJS.ProcessEnv = {}) =>
    runCli(args, { env: { ...s.env, ...policy, ...env }, cwd: s.dir });
  const applied = await cli(['apply', '-f', '.', '--auto-approve']);
  expect(applied.code, applied.stderr).toBe(0);
  writeFileSync(
    path.join(s.dir, 'kms-sync.yaml'),
    smallConfig.replace(
      'apiVersion: kms-sync/v1\n',
      `apiVersion: kms-sync/v1\nstores:\n  - { name: pr, default: true, uri: "${uri}" }\n`,
    ),
  );
  return cli;
}

describe('store credentials stay home', () => {
  it.skipIf(skipWhen(!external, 'no external IPv4 address on this machine: the plain-HTTP vault refusal is not tried'))(
    'vault ?tls=false to a host that is not this machine: refused before any request, VAULT_TOKEN never sent',
    async () => {
      const other = await loggingServer(external!);
      const cli = await prWithStore(`vault://${other.hostPort}/secret/kms?tls=false`);
      // The operator allows the host (KMS_SYNC_STORE_HOSTS): plain HTTP to it is still refused.
      const r = await cli(['plan', '-f', '.'], { VAULT_TOKEN, KMS_SYNC_STORE_HOSTS: other.hostPort });
      expect(r.stdout + r.stderr).toContain(
        `refusing to send credentials over plain HTTP to ${other.hostPort} (tls=false)`,
      );
      expect(other.requests).toEqual([]);
      expect(r.stdout + r.stderr).not.toContain(VAULT_TOKEN);
    },
  );

  it.skipIf(
    skipWhen(!external, 'no external IPv4 address on this machine: the plain-HTTP aws-sm refusal is not tried'),
  )('an aws-sm endpoint= override over plain HTTP to another host: refused, nothing signed or sent', async () => {
    const other = await loggingServer(external!);
    const cli = await prWithStore(`aws-sm://us-east-1/kms?endpoint=http://${other.hostPort}`);
    const r = await cli(['plan', '-f', '.'], {
      AWS_ACCESS_KEY_ID: 'AKIAEXAMPLEEXAMPLE12',
      AWS_SECRET_ACCESS_KEY: AWS_SECRET,
      AWS_REGION: 'us-east-1',
      KMS_SYNC_STORE_HOSTS: other.hostPort,
    });
    expect(r.stdout + r.stderr).toContain(
      `refusing to send credentials over plain HTTP to ${other.hostPort} (endpoint=)`,
    );
    expect(other.requests).toEqual([]);
  });

  it('loopback stays allowed; KMS_SYNC_PLAN_STORES=local (or none) keeps a PR plan from contacting the store at all', async () => {
    const local = await loggingServer('127.0.0.1');
    const cli = await prWithStore(`vault://${local.hostPort}/secret/kms?tls=false`, local.hostPort);
    const limited = await cli(['plan', '-f', '.'], { VAULT_TOKEN, KMS_SYNC_PLAN_STORES: 'local' });
    expect(limited.code, limited.stderr).toBe(0);
    expect(limited.stdout + limited.stderr).toContain(
      'secrets in store default not checked: KMS_SYNC_PLAN_STORES=local allows only local store files',
    );
    const none = await cli(['plan', '-f', '.'], { VAULT_TOKEN, KMS_SYNC_PLAN_STORES: 'none' });
    expect(none.code, none.stderr).toBe(0);
    expect(local.requests).toEqual([]);
    // Without it the plan checks the store it was given (loopback over plain HTTP is allowed).
    await cli(['plan', '-f', '.'], { VAULT_TOKEN });
    expect(local.requests.length).toBeGreaterThan(0);
    expect(local.requests[0]!.headers['x-vault-token']).toBe(VAULT_TOKEN);
    const bad = await cli(['plan', '-f', '.'], { KMS_SYNC_PLAN_STORES: 'some' });
    expect(bad.stderr).toContain('KMS_SYNC_PLAN_STORES must be all, local or none');
  });
});

describe('store answers are bounded', () => {
  it(
    'a store server the configuration names that answers without end: the plan says so and goes on, no out-of-memory crash',
    async () => {
      const server = await startEndlessServer({ chunk: Buffer.alloc(1024 * 1024, 0x20) });
      cleanup.push(server.close);
      const cli = await prWithStore(
        `vault://127.0.0.1:${server.port}/secret/kms?tls=false`,
        `127.0.0.1:${server.port}`,
      );
      const r = await cli(['plan', '-f', '.'], { VAULT_TOKEN });
      expect(r.stdout + r.stderr).toMatch(/the answer is larger than 64 MB; stopped reading it/);
      expect(r.stderr).not.toMatch(/\n\s+at /);
      expect(server.sent()).toBeLessThan(200 * 1024 * 1024);
    },
    patient(60_000),
  );
});
