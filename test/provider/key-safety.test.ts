// Raw keys through the provider when things go wrong, driven the way Terraform core does (no
// terraform binary needed): a secret-store write that fails after the service issued the key
// (the apply fails saying the key is safe in the journal; `kms-sync secrets flush` or the next
// apply lands it), a key whose response was lost (replaced and revoked in the same apply), and
// the orphan of an earlier provider killed mid-request (revoked once its replacement is stored).
// The store is checked with sops-age, independently of kms-sync's store code, and every stored
// key must validate at the service.
import { existsSync, mkdirSync, readFileSync, renameSync, rmSync, statSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startEmulator, type RunningEmulator } from '../../src/emulator/index.js';
import { allOutput, RAW_KEY_PATTERN, repoRoot, runCli, workspace } from '../support/cli.js';
import { Core, dyn, errors, mp, startProvider, type ProviderProcess } from './harness.js';
import { decryptStore } from './terraform-support.js';
import { patient } from '../support/patience.js';

const API_KEY = 'sk_test_keysafety0123456789';
const ENV = 'acme-production';
const ISSUE_ROUTE = 'PUT /client/{client_uuid}';
const schema = Object.values(
  JSON.parse(readFileSync(path.join(repoRoot, 'schemas', 'terraform-provider-kms.json'), 'utf8')).provider_schemas,
)[0] as Core['schema'];
const text = (x: unknown) => JSON.stringify(x, (_k, v) => (v instanceof Uint8Array ? Buffer.from(v).toString() : v));

let emu: RunningEmulator;
let dir: string;
let storeFile: string;
let journalFile: string;
let ageKeyFile: string;
let env: NodeJS.ProcessEnv;
let clientUuid: string;
const seen: string[] = [];
const providers: ProviderProcess[] = [];

async function provider(extraEnv: NodeJS.ProcessEnv = {}): Promise<Core> {
  const p = await startProvider({ cwd: dir, env: { ...env, ...extraEnv } });
  providers.push(p);
  const configured = await p.call('ConfigureProvider', {
    terraform_version: '1.11.4',
    config: mp({ url: null, api_key: null, owner: null, base_dir: null, secret_store: dyn([]) }),
  });
  expect(errors(configured.diagnostics)).toEqual([]);
  return new Core(p, schema);
}

/** Plan and apply one new key as core does; the diagnostics and state as the provider answered. */
async function createKey(core: Core, name: string) {
  const config = core.config('kms_key', { project_env: ENV, client: 'globex', name });
  const plan = await core.plan('kms_key', null, config);
  expect(errors(plan.diagnostics)).toEqual([]);
  return { config, planned: plan.planned, apply: () => core.apply('kms_key', null, plan.planned, config) };
}

const liveKeys = (): { id: string; name: string; keyPrefix: string }[] =>
  (emu.service.toJSON().projects[0] as any).envs[0].clients.find((c: any) => c.name === 'globex').keys;
const journalSize = () => (existsSync(journalFile) ? statSync(journalFile).size : 0);

async function validates(name: string, raw: string): Promise<boolean> {
  const res = await fetch(
    `${emu.url}/client/${clientUuid}?project_env=${ENV}&method_path=${encodeURIComponent('GET:/v1/orders')}`,
    {
      method: 'POST',
      headers: { 'x-api-key': API_KEY, 'content-type': 'application/json' },
      body: JSON.stringify({ name, headers: { 'x-api-key': raw } }),
    },
  );
  return ((await res.json()) as { success?: boolean }).success === true;
}

async function waitFor(cond: () => boolean, ms = 10_000) {
  const end = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > end) throw new Error('timed out waiting');
    await sleep(5);
  }
}

beforeAll(async () => {
  emu = await startEmulator({ port: 0, apiKeys: [API_KEY] });
  dir = workspace();
  storeFile = path.join(dir, '.kms-sync', 'secrets.sops.yaml');
  journalFile = path.join(dir, '.kms-sync', 'journal');
  ageKeyFile = path.join(dir, 'age', 'keys.txt');
  env = { KMS_API_URL: emu.url, KMS_API_KEY: API_KEY, SOPS_AGE_KEY_FILE: ageKeyFile };
  const core = await provider();
  await core.converge('kms_project', null, { slug: 'acme', name: 'Acme' });
  await core.converge('kms_environment', null, {
    project: 'acme',
    type: 'production',
    url: 'https://api.acme.example',
  });
  await core.converge('kms_template', null, {
    project_env: ENV,
    name: 'gold',
    rate_limit_day: 100000,
    max_clients: 50,
  });
  const client = await core.converge('kms_client', null, { project_env: ENV, name: 'globex', template: 'gold' });
  clientUuid = client!.client_uuid as string;
  // A first key, so that the store file exists and the process has checked it is writable.
  seen.push(text(await core.converge('kms_key', null, { project_env: ENV, client: 'globex', name: 'primary' })));
  expect(existsSync(storeFile)).toBe(true);
}, patient(60_000));

afterAll(async () => {
  for (const p of providers) p.kill();
  await emu?.close();
  for (const s of [...seen, ...allOutput]) expect(s).not.toMatch(RAW_KEY_PATTERN);
});

/**
 * Applies a new key while its store breaks: the issuing request is held after the service
 * committed it, and meanwhile the store file becomes a directory. The store comes back after.
 */
async function applyWhileStoreBreaks(core: Core, name: string) {
  const { apply } = await createKey(core, name);
  emu.addFault({ method: 'PUT', route: '/client/{client_uuid}', mode: 'delay-after-commit', delayMs: 400, times: 1 });
  const before = emu.counts()[ISSUE_ROUTE] ?? 0;
  const applying = apply();
  await waitFor(() => (emu.counts()[ISSUE_ROUTE] ?? 0) > before);
  renameSync(storeFile, `${storeFile}.aside`);
  mkdirSync(storeFile);
  writeFileSync(path.join(storeFile, 'x'), 'not a store');
  try {
    const applied = await applying;
    seen.push(text(applied));
    return applied;
  } finally {
    rmSync(storeFile, { recursive: true, force: true });
    renameSync(`${storeFile}.aside`, storeFile);
    emu.clearFaults();
  }
}

describe('a secret-store write that fails after the service issued the key', () => {
  it(
    'fails the apply saying the key is safe in the journal; `kms-sync secrets flush` lands it',
    async () => {
      const core = await provider();
      const applied = await applyWhileStoreBreaks(core, 'flushed');
      const [error, ...more] = errors(applied.diagnostics);
      expect(more).toEqual([]);
      expect(error!.summary).toBe('Key issued, secret store write failed');
      expect(error!.detail).toMatch(/safe in the journal/);
      expect(error!.detail).toMatch(/kms-sync secrets flush/);
      // The state of the key comes back with the error, so Terraform records it (tainted).
      expect(applied.state).toMatchObject({ id: `${ENV}/globex/flushed`, key_id: expect.any(String) });
      const issued = liveKeys().find((k) => k.id === applied.state!.key_id)!;
      expect(issued.name).toBe('flushed');
      expect(applied.state!.key_prefix).toBe(issued.keyPrefix);
      expect(journalSize()).toBeGreaterThan(0);
      expect((await decryptStore(storeFile, ageKeyFile))[`${ENV}/globex/flushed`]).toBeUndefined();

      const flush = await runCli(['secrets', 'flush'], { cwd: dir, env });
      expect(flush.code, flush.stderr).toBe(0);
      expect(flush.stdout).toMatch(/Flushed 1 key/);
      const raw = (await decryptStore(storeFile, ageKeyFile))[`${ENV}/globex/flushed`]!;
      expect(raw).toMatch(RAW_KEY_PATTERN);
      expect(raw.startsWith(applied.state!.key_prefix as string)).toBe(true);
      expect(await validates('flushed', raw)).toBe(true);
    },
    patient(60_000),
  );

  it(
    'or the next apply of the provider lands it before it issues anything',
    async () => {
      const core = await provider();
      const applied = await applyWhileStoreBreaks(core, 'journaled');
      expect(errors(applied.diagnostics)[0]!.detail).toMatch(/safe in the journal/);
      expect((await decryptStore(storeFile, ageKeyFile))[`${ENV}/globex/journaled`]).toBeUndefined();

      // A later terraform apply starts a new provider process; its first key flushes the journal.
      const next = await provider();
      const later = await (await createKey(next, 'later')).apply();
      expect(errors(later.diagnostics)).toEqual([]);
      const stored = await decryptStore(storeFile, ageKeyFile);
      const raw = stored[`${ENV}/globex/journaled`]!;
      expect(raw.startsWith(applied.state!.key_prefix as string)).toBe(true);
      expect(await validates('journaled', raw)).toBe(true);
      expect(await validates('later', stored[`${ENV}/globex/later`]!)).toBe(true);
    },
    patient(60_000),
  );
});

describe('keys whose response never arrived', () => {
  it(
    'replaces and revokes a key whose response was lost, within the same apply',
    async () => {
      const core = await provider();
      const { apply } = await createKey(core, 'dropped');
      emu.addFault({ method: 'PUT', route: '/client/{client_uuid}', mode: 'drop-after-commit', times: 1 });
      const before = emu.counts()[ISSUE_ROUTE] ?? 0;
      const applied = await apply();
      emu.clearFaults();
      // The dropped request, then the re-issue.
      expect((emu.counts()[ISSUE_ROUTE] ?? 0) - before).toBeGreaterThanOrEqual(2);
      seen.push(text(applied));
      expect(errors(applied.diagnostics)).toEqual([]);
      const generations = liveKeys().filter((k) => k.name === 'dropped');
      // The key the lost response carried was revoked; only the replacement is live, and stored.
      expect(generations.map((k) => k.id)).toEqual([applied.state!.key_id]);
      const raw = (await decryptStore(storeFile, ageKeyFile))[`${ENV}/globex/dropped`]!;
      expect(raw.startsWith(applied.state!.key_prefix as string)).toBe(true);
      expect(await validates('dropped', raw)).toBe(true);
    },
    patient(60_000),
  );

  it(
    'revokes the orphan of a provider killed mid-request once its replacement is stored',
    async () => {
      const core = await provider();
      const { apply } = await createKey(core, 'interrupted');
      // The service commits the key and holds the response; the provider is killed meanwhile, as a
      // cancelled or crashed terraform apply would leave it: no state, no raw value, a live key.
      emu.addFault({
        method: 'PUT',
        route: '/client/{client_uuid}',
        mode: 'delay-after-commit',
        delayMs: 5_000,
        times: 1,
      });
      const applying = apply().catch((e: Error) => e);
      await waitFor(() => liveKeys().some((k) => k.name === 'interrupted'));
      const orphan = liveKeys().find((k) => k.name === 'interrupted')!;
      providers.at(-1)!.kill();
      expect(await applying).toBeInstanceOf(Error);
      emu.clearFaults();
      expect(journalSize()).toBeGreaterThan(0);

      // The next apply plans the key again (Terraform has no state of it) and creates it.
      const next = await provider();
      const again = await (await createKey(next, 'interrupted')).apply();
      seen.push(text(again));
      expect(errors(again.diagnostics)).toEqual([]);
      expect(again.state!.key_id).not.toBe(orphan.id);
      const generations = liveKeys().filter((k) => k.name === 'interrupted');
      expect(generations.map((k) => k.id)).toEqual([again.state!.key_id]);
      const raw = (await decryptStore(storeFile, ageKeyFile))[`${ENV}/globex/interrupted`]!;
      expect(raw.startsWith(again.state!.key_prefix as string)).toBe(true);
      expect(await validates('interrupted', raw)).toBe(true);
    },
    patient(60_000),
  );
});
