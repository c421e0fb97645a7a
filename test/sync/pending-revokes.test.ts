// Issue 24: the paths next to the one the crash campaign covered. A `rotate --revoke-old` killed
// as its revoke goes out leaves the revoke journaled (with the new raw key), reported by plan and
// drift until the next apply sends it; one configuration folder applied to two services with one
// store never lets the second overwrite the first's raw keys (refused before anything is written).
import { spawn } from 'node:child_process';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, afterEach, beforeEach, describe, expect, it } from 'vitest';
import { startEmulator, type RunningEmulator } from '../../src/emulator/index.js';
import { SopsFileStore } from '../../src/secrets/index.js';
import { allOutput, cliPath, RAW_KEY_PATTERN, runCli, workspace } from '../support/cli.js';
import { patient, waitFor } from '../support/patience.js';

const TEST_KEY = 'sk_test_pendingrevokes01234';
const LIVE_KEY = 'sk_live_pendingrevokes01234';
const config = (clients: string[]) => `apiVersion: kms-sync/v1
owner: pending-revokes
projects:
  - slug: pr
    name: Pending revokes
    environments:
      - type: production
        url: https://pr.example
        templates: [{ name: std, rateLimitDay: 100000, maxClients: 1000 }]
        clients:
${clients.map((c) => `          - { name: ${c}, template: std, keys: [{ name: main }] }\n`).join('')}`;

let emus: RunningEmulator[] = [];
let dir: string;
let env: NodeJS.ProcessEnv;
const call = async (emu: RunningEmulator, key: string, method: string, p: string, body?: unknown) =>
  (await (
    await fetch(emu.url + p, {
      method,
      headers: { 'x-api-key': key, 'content-type': 'application/json' },
      ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
    })
  ).json()) as any;
const clientsOf = async (emu: RunningEmulator, key: string) =>
  (await call(emu, key, 'GET', '/client?project_env=pr-production&limit=100')).data ?? [];
const validates = async (emu: RunningEmulator, key: string, client: any, raw: string | undefined) =>
  Boolean(raw) &&
  (
    await call(emu, key, 'POST', `/client/${client.id}?project_env=pr-production&method_path=GET:/x`, {
      name: 'main',
      headers: { 'x-api-key': raw },
    })
  ).success === true;
const storeFile = () => path.join(dir, 'config', '.kms-sync', 'secrets.sops.yaml');
const store = () => new SopsFileStore(storeFile(), { env });
const cli = (args: string[], extra: NodeJS.ProcessEnv = {}) => runCli(args, { env: { ...env, ...extra }, cwd: dir });
const write = (text: string) => {
  mkdirSync(path.join(dir, 'config'), { recursive: true });
  writeFileSync(path.join(dir, 'config', 'kms.yaml'), text);
};

beforeEach(async () => {
  emus = [await startEmulator({ port: 0, apiKeys: [TEST_KEY] })];
  dir = workspace();
  env = {
    KMS_API_URL: emus[0]!.url,
    KMS_API_KEY: TEST_KEY,
    SOPS_AGE_KEY_FILE: path.join(dir, 'age', 'keys.txt'),
    KMS_SYNC_ALLOW_LOCAL_STORE: '1',
  };
});
afterEach(async () => {
  for (const e of emus) await e.close();
});
afterAll(() => {
  for (const text of allOutput) expect(text).not.toMatch(RAW_KEY_PATTERN);
});

describe('pending revokes', () => {
  it(
    'rotate --revoke-old killed as its revoke goes out: plan and drift report the old key, the next apply revokes it',
    async () => {
      const emu = emus[0]!;
      write(config(['a']));
      expect((await cli(['apply', '-f', 'config', '--auto-approve'])).code).toBe(0);
      const old = (await clientsOf(emu, TEST_KEY))[0].keys[0];
      const oldRaw = await store().read('pr-production/a/main');
      const trace = path.join(dir, 'trace');
      const child = spawn(
        process.execPath,
        [cliPath, 'rotate', '-f', 'config', '--key', 'key.pr-production/a/main', '--revoke-old', '--auto-approve'],
        {
          cwd: dir,
          env: {
            PATH: process.env.PATH,
            HOME: dir,
            ...env,
            KMS_SYNC_TEST_TRACE: trace,
            KMS_SYNC_TEST_PAUSE: `before-revoke:${patient(5000)}`,
          },
          stdio: 'ignore',
        },
      );
      const reached = () => {
        try {
          return readFileSync(trace, 'utf8').includes('before-revoke');
        } catch {
          return false;
        }
      };
      expect(await waitFor(reached, 30_000)).toBe(true);
      child.kill('SIGKILL');
      await new Promise((ok) => child.on('exit', ok));
      // The old key is still live, and the store holds the new one: the old raw value is gone.
      const [a] = await clientsOf(emu, TEST_KEY);
      expect(a.keys.map((k: any) => k.id)).toContain(old.id);
      expect(await validates(emu, TEST_KEY, a, oldRaw)).toBe(true);
      expect(await store().read('pr-production/a/main')).not.toBe(oldRaw);

      const plan = await cli(['plan', '-f', 'config', '--detailed-exitcode']);
      expect(plan.code, plan.stdout + plan.stderr).toBe(2);
      expect(plan.stdout).toContain('pending revoke');
      const drift = await cli(['drift', '-f', 'config']);
      expect(drift.code, drift.stdout + drift.stderr).toBe(2);

      const apply = await cli(['apply', '-f', 'config', '--auto-approve']);
      expect(apply.code, apply.stdout + apply.stderr).toBe(0);
      const [after] = await clientsOf(emu, TEST_KEY);
      expect(after.keys.map((k: any) => k.id)).not.toContain(old.id);
      expect(await validates(emu, TEST_KEY, after, oldRaw)).toBe(false);
      expect(await validates(emu, TEST_KEY, after, await store().read('pr-production/a/main'))).toBe(true);
      const again = await cli(['plan', '-f', 'config', '--detailed-exitcode']);
      expect(again.code, again.stdout).toBe(0);
    },
    patient(60_000),
  );

  it(
    'rotate --revoke-old killed before its response arrived: the next apply re-issues the lost key and revokes both older ones',
    async () => {
      const emu = emus[0]!;
      write(config(['a']));
      expect((await cli(['apply', '-f', 'config', '--auto-approve'])).code).toBe(0);
      const old = (await clientsOf(emu, TEST_KEY))[0].keys[0];
      const oldRaw = await store().read('pr-production/a/main');
      emu.addFault({ method: 'PUT', route: '/client/{client_uuid}', mode: 'delay-after-commit', delayMs: 5000 });
      const child = spawn(
        process.execPath,
        [cliPath, 'rotate', '-f', 'config', '--key', 'key.pr-production/a/main', '--revoke-old', '--auto-approve'],
        {
          cwd: dir,
          env: { PATH: process.env.PATH, HOME: dir, ...env },
          stdio: 'ignore',
        },
      );
      // The service committed the new key; its response never reaches the process.
      expect(
        await waitFor(async () => (await clientsOf(emu, TEST_KEY))[0].keys.length >= 2, 30_000),
        'the service committed the new key',
      ).toBe(true);
      child.kill('SIGKILL');
      await new Promise((ok) => child.on('exit', ok));
      const lost = (await clientsOf(emu, TEST_KEY))[0].keys.find((k: any) => k.id !== old.id);
      expect(lost).toBeDefined();

      const apply = await cli(['apply', '-f', 'config', '--auto-approve']);
      expect(apply.code, apply.stdout + apply.stderr).toBe(0);
      const [a] = await clientsOf(emu, TEST_KEY);
      expect(a.keys.map((k: any) => k.id)).not.toContain(old.id);
      expect(a.keys.map((k: any) => k.id)).not.toContain(lost.id);
      expect(a.keys).toHaveLength(1);
      expect(await validates(emu, TEST_KEY, a, oldRaw)).toBe(false);
      expect(await validates(emu, TEST_KEY, a, await store().read('pr-production/a/main'))).toBe(true);
      expect((await cli(['plan', '-f', 'config', '--detailed-exitcode'])).code).toBe(0);
    },
    patient(60_000),
  );

  it(
    'rotate --revoke-old whose response was lost and settled by re-reading, then killed (issue 40): the superseded generation is revoked, never given the 7-day overlap',
    async () => {
      const emu = emus[0]!;
      write(config(['a', 'b']));
      expect((await cli(['apply', '-f', 'config', '--auto-approve'])).code).toBe(0);
      const before = await clientsOf(emu, TEST_KEY);
      const [a, b] = ['a', 'b'].map((n) => before.find((c: any) => c.name === n));
      const [oldA, oldB] = [a.keys[0], b.keys[0]];
      const oldRawA = await store().read('pr-production/a/main');
      // a's key-issuing PUT commits and its response is dropped: the run settles it by re-reading,
      // records the lost key, and re-issues; that second PUT is throttled (429, retry in 30 s), so
      // it stays unsent while b's response is journaled and the process is killed there.
      const onA = new RegExp(`^/client/${a.id}$`);
      emu.addFault({ method: 'PUT', route: onA, mode: 'drop-after-commit', times: 1 });
      emu.addFault({ method: 'PUT', route: onA, mode: '429', retryAfterSeconds: 30, times: 1 });
      const trace = path.join(dir, 'trace');
      const child = spawn(
        process.execPath,
        [cliPath, 'rotate', '-f', 'config', '--key', 'key.pr-production/*/main', '--revoke-old', '--auto-approve'],
        {
          cwd: dir,
          env: {
            PATH: process.env.PATH,
            HOME: dir,
            ...env,
            KMS_SYNC_TEST_TRACE: trace,
            KMS_SYNC_TEST_PAUSE: 'after-journal:20000',
          },
          stdio: 'ignore',
        },
      );
      const points = () => {
        try {
          return readFileSync(trace, 'utf8')
            .split('\n')
            .map((l) => l.split(' ')[0]);
        } catch {
          return [];
        }
      };
      // Three issue-sent (a, b, a's re-issue) and b's after-journal.
      const ready = () => points().filter((p) => p === 'issue-sent').length >= 3 && points().includes('after-journal');
      await waitFor(ready, 30_000);
      expect(points()).toEqual(expect.arrayContaining(['issue-sent', 'after-journal']));
      expect(ready(), points().join(' ')).toBe(true);
      child.kill('SIGKILL');
      await new Promise((ok) => child.on('exit', ok));
      const lostA = (await clientsOf(emu, TEST_KEY))
        .find((c: any) => c.name === 'a')
        .keys.find((k: any) => k.id !== oldA.id);
      expect(lostA, 'the dropped PUT committed a new generation').toBeDefined();

      // Until it is revoked, the superseded generation is reported as a pending revoke.
      const plan = await cli(['plan', '-f', 'config', '--detailed-exitcode']);
      expect(plan.code, plan.stdout + plan.stderr).toBe(2);
      expect(plan.stdout).toContain('# key.pr-production/a/main will be destroyed (pending revoke');
      expect(plan.stdout).not.toContain('previous generation after a rotation');

      const apply = await cli(['apply', '-f', 'config', '--auto-approve']);
      expect(apply.code, apply.stdout + apply.stderr).toBe(0);
      expect(apply.stdout).not.toContain('expires 7d after');
      const after = await clientsOf(emu, TEST_KEY);
      for (const [name, old] of [
        ['a', oldA],
        ['b', oldB],
      ] as const) {
        const c = after.find((x: any) => x.name === name);
        expect(
          c.keys.map((k: any) => k.id),
          `${name}: the superseded generation is revoked`,
        ).not.toContain(old.id);
        expect(c.keys, `${name}: one generation left`).toHaveLength(1);
        expect(await validates(emu, TEST_KEY, c, await store().read(`pr-production/${name}/main`))).toBe(true);
      }
      const afterA = after.find((x: any) => x.name === 'a');
      expect(afterA.keys.map((k: any) => k.id)).not.toContain(lostA.id);
      expect(await validates(emu, TEST_KEY, afterA, oldRawA)).toBe(false);
      expect((await cli(['plan', '-f', 'config', '--detailed-exitcode'])).code).toBe(0);
    },
    patient(90_000),
  );

  it(
    'one folder applied to two services: the second refuses before writing anything, and the first keeps its raw keys',
    async () => {
      const staging = emus[0]!;
      const production = await startEmulator({ port: 0, apiKeys: [LIVE_KEY] });
      emus.push(production);
      write(config(['web', 'api']));
      expect((await cli(['apply', '-f', 'config', '--auto-approve'])).code).toBe(0);
      const second = await cli(['apply', '-f', 'config', '--auto-approve'], {
        KMS_API_URL: production.url,
        KMS_API_KEY: LIVE_KEY,
        CI: 'true',
      });
      expect(second.code, second.stdout + second.stderr).toBe(1);
      expect(second.stdout + second.stderr).toContain('holds the secrets of another service');
      expect(second.stdout + second.stderr).toContain('Nothing was issued');
      // Nothing at all was written at the second service, and every key of the first is still held.
      expect((await call(production, LIVE_KEY, 'GET', '/project')).data ?? []).toEqual([]);
      for (const c of await clientsOf(staging, TEST_KEY))
        expect(await validates(staging, TEST_KEY, c, await store().read(`pr-production/${c.name}/main`))).toBe(true);
      // With a store per service (the way out the message names), both services keep every key.
      write(
        config(['web', 'api']).replace(
          'apiVersion: kms-sync/v1\n',
          'apiVersion: kms-sync/v1\nstores:\n  - { name: main, default: true, uri: "sops:.kms-sync/secrets.${env:KMS_STAGE}.sops.yaml" }\n',
        ),
      );
      expect(
        (
          await cli(['apply', '-f', 'config', '--auto-approve'], {
            KMS_STAGE: 'production',
            KMS_SYNC_ENV_ALLOW: 'KMS_STAGE',
            KMS_API_URL: production.url,
            KMS_API_KEY: LIVE_KEY,
            CI: 'true',
          })
        ).code,
      ).toBe(0);
      const prodStore = new SopsFileStore(path.join(dir, 'config', '.kms-sync', 'secrets.production.sops.yaml'), {
        env,
      });
      for (const c of await clientsOf(production, LIVE_KEY))
        expect(await validates(production, LIVE_KEY, c, await prodStore.read(`pr-production/${c.name}/main`))).toBe(
          true,
        );
      for (const c of await clientsOf(staging, TEST_KEY))
        expect(await validates(staging, TEST_KEY, c, await store().read(`pr-production/${c.name}/main`))).toBe(true);
    },
    patient(60_000),
  );
});
