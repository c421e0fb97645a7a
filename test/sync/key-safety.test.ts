// Issue 10, case by case, against the emulator over HTTP with the real CLI process: keys an apply
// left in the journal are flushed before the next plan (never rotated away), a create whose
// response never arrived leaves an orphan that the next run re-issues and revokes, a lost rotate
// response never revokes a kept generation, a delete whose response was lost counts as done, and
// Ctrl-C finishes the requests in flight. (The crash campaign, test/crash/, kills at random.)
import { spawn } from 'node:child_process';
import { mkdirSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeEach, describe, expect, it } from 'vitest';
import { startEmulator, type RunningEmulator } from '../../src/emulator/index.js';
import { SopsFileStore } from '../../src/secrets/index.js';
import { allOutput, cliPath, RAW_KEY_PATTERN, runCli, workspace } from '../support/cli.js';
import { patient, waitFor } from '../support/patience.js';

const API_KEY = 'sk_test_keysafety0123456789';
const config = (clients: string[], keys = '[{ name: main }]') => `apiVersion: kms-sync/v1
owner: key-safety
projects:
  - slug: ks
    name: Key safety
    environments:
      - type: production
        url: https://ks.example
        templates: [{ name: std, rateLimitDay: 100000, maxClients: 1000 }]
        clients:
${clients.map((c) => `          - { name: ${c}, template: std, keys: ${keys} }\n`).join('')}`;

let emu: RunningEmulator;
let dir: string;
let env: NodeJS.ProcessEnv;
const headers = { 'x-api-key': API_KEY, 'content-type': 'application/json' };
const api = async (method: string, p: string, body?: unknown) =>
  (await (
    await fetch(emu.url + p, { method, headers, ...(body !== undefined ? { body: JSON.stringify(body) } : {}) })
  ).json()) as any;
const clients = async () => {
  const out: any[] = [];
  for (let page = 1; ; page++) {
    const r = await api('GET', `/client?project_env=ks-production&limit=100&page=${page}`);
    out.push(...(r.data ?? []));
    if (page >= (r.pagination?.pages ?? 1)) return out;
  }
};
const storeFile = () => path.join(dir, 'config', '.kms-sync', 'secrets.sops.yaml');
const store = () => new SopsFileStore(storeFile(), { env });
const cli = (args: string[]) => runCli(args, { env, cwd: dir });
const write = (text: string) => {
  mkdirSync(path.join(dir, 'config'), { recursive: true });
  writeFileSync(path.join(dir, 'config', 'kms.yaml'), text);
};
/** Every live key of every client has its raw value in the store (current generations). */
async function everyKeyStored(): Promise<void> {
  const s = store();
  await Promise.all(
    (await clients()).flatMap((c) =>
      [...new Set<string>(c.keys.map((k: any) => k.name))].map(async (name) => {
        const raw = await s.read(`ks-production/${c.name}/${name}`);
        const v = await api('POST', `/client/${c.id}?project_env=ks-production&method_path=GET:/x`, {
          name,
          headers: { 'x-api-key': raw },
        });
        expect(v.success, `${c.name}/${name}`).toBe(true);
        expect(
          c.keys.filter((k: any) => k.name === name),
          `${c.name}/${name} generations`,
        ).toHaveLength(1);
      }),
    ),
  );
}

afterAll(async () => {
  await emu?.close();
  for (const text of allOutput) expect(text).not.toMatch(RAW_KEY_PATTERN);
});
beforeEach(async () => {
  await emu?.close();
  emu = await startEmulator({ port: 0, apiKeys: [API_KEY] });
  dir = workspace();
  env = {
    KMS_API_URL: emu.url,
    KMS_API_KEY: API_KEY,
    SOPS_AGE_KEY_FILE: path.join(dir, 'age', 'keys.txt'),
    KMS_SYNC_ALLOW_LOCAL_STORE: '1',
  };
});

describe('key safety', () => {
  it('keys left in the journal by a failed store write are flushed before the next plan, never rotated away', async () => {
    write(config(['a']));
    expect((await cli(['apply', '-f', 'config', '--auto-approve'])).code).toBe(0);
    write(config(['a', 'b', 'c']));
    // The store breaks after the first key-issuing request reached the service.
    emu.addFault({ method: 'POST', route: '/client', mode: 'delay-after-commit', delayMs: 1500 });
    const run = cli(['apply', '-f', 'config', '--auto-approve']);
    expect(
      await waitFor(() => (emu.counts()['POST /client'] ?? 0) >= 2, 30_000),
      'the second key-issuing request reached the service',
    ).toBe(true);
    renameSync(storeFile(), `${storeFile()}.aside`);
    mkdirSync(storeFile());
    const first = await run;
    expect(first.code, first.stdout + first.stderr).toBe(3);
    expect(first.stdout).toContain('safe in the journal');
    rmSync(storeFile(), { recursive: true });
    renameSync(`${storeFile()}.aside`, storeFile());
    const plan = await cli(['plan', '-f', 'config', '--detailed-exitcode']);
    expect(plan.stderr).toContain('Flushed 2 key(s) from the journal into');
    expect(plan.code, plan.stdout).toBe(0);
    await everyKeyStored();
  });

  it('a create whose response never arrived (the process was killed) leaves an orphan that the next run re-issues and revokes', async () => {
    write(config(['a']));
    expect((await cli(['apply', '-f', 'config', '--auto-approve'])).code).toBe(0);
    write(config(['a', 'b']));
    emu.addFault({ method: 'POST', route: '/client', mode: 'delay-after-commit', delayMs: 3000 });
    const child = spawn(process.execPath, [cliPath, 'apply', '-f', 'config', '--auto-approve'], {
      cwd: dir,
      env: { PATH: process.env.PATH, HOME: dir, ...env },
      stdio: 'ignore',
    });
    const before = emu.counts()['POST /client'] ?? 0;
    expect(
      await waitFor(() => (emu.counts()['POST /client'] ?? 0) !== before, 30_000),
      'the key-issuing request reached the service',
    ).toBe(true);
    await new Promise((ok) => setTimeout(ok, 300));
    child.kill('SIGKILL');
    await new Promise((ok) => child.on('exit', ok));
    const orphan = (await clients()).find((c) => c.name === 'b').keys[0];
    const plan = JSON.parse((await cli(['plan', '-f', 'config', '--json'])).stdout);
    expect(plan.resource_changes.map((c: any) => [c.address, c.change.action, c.change.action_reason])).toEqual([
      ['key.ks-production/b/main', 'rotate', 'reissue_lost_key'],
      ['key.ks-production/b/main', 'delete', 'revoke_orphan'],
    ]);
    expect((await cli(['apply', '-f', 'config', '--auto-approve'])).code).toBe(0);
    const b = (await clients()).find((c) => c.name === 'b');
    expect(b.keys.map((k: any) => k.id)).not.toContain(orphan.id);
    await everyKeyStored();
    expect((await cli(['plan', '-f', 'config', '--detailed-exitcode'])).code).toBe(0);
  });

  it('a rotate whose response is lost never revokes the generation kept for overlap, and issues one new key', async () => {
    write(config(['a'], '[{ name: main, rotation: { overlap: 1h } }]'));
    expect((await cli(['apply', '-f', 'config', '--auto-approve'])).code).toBe(0);
    expect((await cli(['rotate', '-f', 'config', '--key', 'key.ks-production/a/main', '--auto-approve'])).code).toBe(0);
    const kept = (await clients())[0].keys.map((k: any) => k.id);
    expect(kept).toHaveLength(2); // the first generation is kept for the overlap
    emu.addFault({ method: 'PUT', route: '/client/{client_uuid}', mode: 'drop-after-commit' });
    const r = await cli(['rotate', '-f', 'config', '--key', 'key.ks-production/a/main', '--auto-approve']);
    expect(r.code, r.stdout + r.stderr).toBe(0);
    expect(r.stdout + r.stderr).toContain('re-issued, then revoked');
    const after = (await clients())[0].keys;
    // Both earlier generations are still there; exactly one new one is live with its secret stored.
    for (const id of kept) expect(after.map((k: any) => k.id)).toContain(id);
    expect(after).toHaveLength(3);
    const raw = await store().read('ks-production/a/main');
    const v = await api('POST', `/client/${(await clients())[0].id}?project_env=ks-production&method_path=GET:/x`, {
      name: 'main',
      headers: { 'x-api-key': raw },
    });
    expect(v.success).toBe(true);
  });

  it('a delete whose response was lost counts as done', async () => {
    write(config(['a', 'b']));
    expect((await cli(['apply', '-f', 'config', '--auto-approve'])).code).toBe(0);
    write(config(['a']));
    emu.addFault({ method: 'DELETE', route: '/client/{client_uuid}', mode: 'drop-after-commit' });
    const r = await cli(['apply', '-f', 'config', '--auto-approve']);
    expect(r.code, r.stdout + r.stderr).toBe(0);
    expect((await clients()).map((c) => c.name)).toEqual(['a']);
  });

  it(
    'Ctrl-C finishes the requests in flight, journals their keys and exits 3; the next apply converges with every key stored',
    async () => {
      await emu.close();
      emu = await startEmulator({ port: 0, apiKeys: [API_KEY], latencyMs: 200 });
      env.KMS_API_URL = emu.url;
      const names = Array.from({ length: 40 }, (_, i) => `c${i}`);
      write(config(names));
      expect((await cli(['apply', '-f', 'config', '--auto-approve'])).code).toBe(0);
      // A second key for each: one key-issuing PUT per client, two in flight at a time.
      write(config(names, '[{ name: main }, { name: second }]'));
      const child = spawn(
        process.execPath,
        [cliPath, 'apply', '-f', 'config', '--auto-approve', '--parallelism', '2'],
        {
          cwd: dir,
          env: { PATH: process.env.PATH, HOME: dir, NO_COLOR: '1', ...env },
          stdio: ['ignore', 'pipe', 'pipe'],
        },
      );
      // Its output is whole once its pipes closed ('exit' can come before the last of it is read).
      const exited = new Promise<number | null>((ok) => child.on('close', ok));
      let text = '';
      child.stdout!.on('data', (d) => {
        text += d;
      });
      child.stderr!.on('data', (d) => {
        text += d;
      });
      expect(
        await waitFor(() => (emu.counts()['PUT /client/{client_uuid}'] ?? 0) >= 2, 30_000),
        'two key-issuing updates reached the service',
      ).toBe(true);
      child.kill('SIGINT');
      const code = await exited;
      allOutput.push(text);
      expect(text).toContain('Interrupt received');
      expect(code, text).toBe(3);
      // It stopped early: not every client got its second key.
      const partial = (await clients()).filter((c) => c.keys.some((k: any) => k.name === 'second')).length;
      expect(partial).toBeGreaterThan(0);
      expect(partial).toBeLessThan(40);
      const r = await cli(['apply', '-f', 'config', '--auto-approve']);
      expect(r.code, r.stdout + r.stderr).toBe(0);
      await everyKeyStored();
    },
    patient(60_000),
  );
});
