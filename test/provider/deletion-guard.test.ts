// The provider's deletion guard (issue 36 "for every front end", issue 41), driven as Terraform
// core plans deletes (PlanResourceChange with no proposed object) against the built provider and
// the emulator: past KMS_SYNC_MAX_DELETES (default 10) deletes in one plan, the plan fails before
// anything is deleted, saying how to approve; a key of a protected client is never revoked
// without KMS_SYNC_APPROVE_DELETES=1; a replacement is not a delete.
import { readFileSync, rmSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { patient } from '../support/patience.js';
import { startEmulator, type RunningEmulator } from '../../src/emulator/index.js';
import { repoRoot, workspace } from '../support/cli.js';
import { Core, dyn, errors, mp, startProvider, type ProviderProcess } from './harness.js';

const API_KEY = 'sk_test_delguard0123456789';
const ENV = 'acme-production';
const schema = Object.values(
  JSON.parse(readFileSync(path.join(repoRoot, 'schemas', 'terraform-provider-kms.json'), 'utf8')).provider_schemas,
)[0] as Core['schema'];

let emu: RunningEmulator;
let dir: string;
const procs: ProviderProcess[] = [];
const clients: Record<string, unknown>[] = [];
let keyOfProtected: Record<string, unknown>;

async function provider(env: NodeJS.ProcessEnv = {}): Promise<Core> {
  const p = await startProvider({
    cwd: dir,
    env: { KMS_API_URL: emu.url, KMS_API_KEY: API_KEY, SOPS_AGE_KEY_FILE: path.join(dir, 'age', 'keys.txt'), ...env },
  });
  procs.push(p);
  const configured = await p.call('ConfigureProvider', {
    terraform_version: '1.11.4',
    config: mp({ url: null, api_key: null, owner: null, base_dir: null, secret_store: dyn([]) }),
  });
  expect(errors(configured.diagnostics)).toEqual([]);
  return new Core(p, schema);
}

beforeAll(async () => {
  emu = await startEmulator({ port: 0, apiKeys: [API_KEY] });
  dir = workspace();
  const core = await provider();
  await core.converge('kms_project', null, { slug: 'acme', name: 'Acme' });
  await core.converge('kms_environment', null, {
    project: 'acme',
    type: 'production',
    url: 'https://api.acme.example',
  });
  await core.converge('kms_template', null, { project_env: ENV, name: 'gold', rate_limit_day: 1000 });
  for (let i = 1; i <= 4; i++)
    clients.push((await core.converge('kms_client', null, { project_env: ENV, name: `c${i}`, template: 'gold' }))!);
  await core.converge('kms_client', null, { project_env: ENV, name: 'vip', template: 'gold', protected: true });
  keyOfProtected = (await core.converge('kms_key', null, { project_env: ENV, client: 'vip', name: 'primary' }))!;
}, patient(60_000));

afterAll(async () => {
  for (const p of procs) p.kill();
  await emu?.close();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

describe('the deletion guard', () => {
  it(
    'fails the plan past KMS_SYNC_MAX_DELETES deletes, saying how to approve; nothing is deleted',
    async () => {
      const core = await provider({ KMS_SYNC_MAX_DELETES: '3' });
      const plans = [];
      for (const c of clients) plans.push(await core.plan('kms_client', c, null));
      expect(plans.slice(0, 3).map((p) => errors(p.diagnostics))).toEqual([[], [], []]);
      const [error] = errors(plans[3]!.diagnostics);
      expect(error?.summary).toBe('Deletion guard');
      expect(error!.detail).toContain('more than 3 objects at once');
      expect(error!.detail).toContain('KMS_SYNC_MAX_DELETES=');
      // An update or a replacement is not a delete: planned in the same process, it passes.
      const replace = await core.plan(
        'kms_client',
        clients[0]!,
        core.config('kms_client', { project_env: ENV, name: 'c1', template: 'gold', type: 'server' }),
      );
      expect(errors(replace.diagnostics)).toEqual([]);
      expect((emu.service.toJSON().projects[0] as any).envs[0].clients).toHaveLength(5);
      // Approved for the run: the same plan passes.
      const approved = await provider({ KMS_SYNC_MAX_DELETES: '4' });
      for (const c of clients) expect(errors((await approved.plan('kms_client', c, null)).diagnostics)).toEqual([]);
    },
    patient(60_000),
  );

  it(
    'holds the revoke of a key of a protected client unless KMS_SYNC_APPROVE_DELETES=1',
    async () => {
      const held = await (await provider()).plan('kms_key', keyOfProtected, null);
      expect(errors(held.diagnostics).map((d) => d.summary)).toEqual(['Deletion guard']);
      expect(errors(held.diagnostics)[0]!.detail).toContain('KMS_SYNC_APPROVE_DELETES=1');
      expect(
        errors(
          (await (await provider({ KMS_SYNC_APPROVE_DELETES: '1' })).plan('kms_key', keyOfProtected, null)).diagnostics,
        ),
      ).toEqual([]);
    },
    patient(60_000),
  );

  it(
    'refuses a KMS_SYNC_MAX_DELETES that is not a number at configure',
    async () => {
      const p = await startProvider({
        cwd: dir,
        env: { KMS_API_URL: emu.url, KMS_API_KEY: API_KEY, KMS_SYNC_MAX_DELETES: 'lots' },
      });
      procs.push(p);
      const configured = await p.call('ConfigureProvider', {
        terraform_version: '1.11.4',
        config: mp({ url: null, api_key: null, owner: null, base_dir: null, secret_store: dyn([]) }),
      });
      expect(errors(configured.diagnostics).map((d: any) => d.summary)).toEqual(['Invalid KMS_SYNC_MAX_DELETES']);
    },
    patient(30_000),
  );
});
