// Terraform's `timeouts` block (issue 41), driven as Terraform core does against the built
// provider and the emulator over HTTP: a limit that passes fails the operation with "Timed out"
// naming the limit, well before the client's own retries would have given up, and no request
// starts past it; a bad duration fails validation at the attribute; a change of the block alone
// updates the state without asking the service.
import { readFileSync, rmSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startEmulator, type RunningEmulator } from '../../src/emulator/index.js';
import { repoRoot, workspace } from '../support/cli.js';
import { Core, dyn, errors, mp, startProvider, stepsOf, type ProviderProcess } from './harness.js';
import { patient } from '../support/patience.js';

const API_KEY = 'sk_test_timeouts0123456789';
const ENV = 'acme-production';
const schema = Object.values(
  JSON.parse(readFileSync(path.join(repoRoot, 'schemas', 'terraform-provider-kms.json'), 'utf8')).provider_schemas,
)[0] as Core['schema'];
const limits = (v: Record<string, string>) => ({ create: null, read: null, update: null, delete: null, ...v });

let emu: RunningEmulator;
let dir: string;
let proc: ProviderProcess;
let core: Core;
let template: Record<string, unknown>;

beforeAll(async () => {
  emu = await startEmulator({ port: 0, apiKeys: [API_KEY] });
  dir = workspace();
  proc = await startProvider({ cwd: dir, env: { KMS_API_URL: emu.url, KMS_API_KEY: API_KEY } });
  const configured = await proc.call('ConfigureProvider', {
    terraform_version: '1.11.4',
    config: mp({ url: null, api_key: null, owner: null, base_dir: null, secret_store: dyn([]) }),
  });
  expect(errors(configured.diagnostics)).toEqual([]);
  core = new Core(proc, schema);
  await core.converge('kms_project', null, { slug: 'acme', name: 'Acme' });
  await core.converge('kms_environment', null, {
    project: 'acme',
    type: 'production',
    url: 'https://api.acme.example',
  });
  template = (await core.converge('kms_template', null, { project_env: ENV, name: 'gold', rate_limit_day: 1000 }))!;
}, patient(60_000));

afterAll(async () => {
  proc?.kill();
  await emu?.close();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

describe('timeouts blocks', () => {
  it('a duration Terraform would not accept fails validation at timeouts.<operation>', async () => {
    const diags = await core.validate(
      'kms_client',
      core.config('kms_client', {
        project_env: ENV,
        name: 'v',
        template: 'gold',
        timeouts: limits({ create: 'soon', delete: '10m' }),
      }),
    );
    expect(errors(diags).map((d) => [d.summary, stepsOf(d)])).toEqual([['Invalid timeout', ['timeouts', 'create']]]);
    expect(
      errors(
        await core.validate(
          'kms_client',
          core.config('kms_client', {
            project_env: ENV,
            name: 'v',
            timeouts: limits({ create: '1h30m', read: '1.5m', update: '500ms' }),
          }),
        ),
      ),
    ).toEqual([]);
  });

  it(
    'a create whose service answers too slowly fails with "Timed out" at its limit, not after the retries',
    async () => {
      const config = core.config('kms_client', {
        project_env: ENV,
        name: 'slow',
        template: 'gold',
        timeouts: limits({ create: '1s' }),
      });
      const plan = await core.plan('kms_client', null, config);
      expect(errors(plan.diagnostics)).toEqual([]);
      // Then every listing is refused with 429 and Retry-After: 5 s: without a limit the client would
      // wait 20 s over its retries. (503s back off with random jitter, which can sum to under the
      // limit and give up first: that is how this test once failed in CI.)
      emu.addFault({ method: 'GET', route: '/client', mode: '429', retryAfterSeconds: 5, times: 1000 });
      try {
        const started = Date.now();
        const applied = await core.apply('kms_client', null, plan.planned, config);
        const took = Date.now() - started;
        const [error] = errors(applied.diagnostics);
        expect(error?.summary, JSON.stringify(applied.diagnostics)).toBe('Timed out');
        expect(error!.detail).toContain('kms_client create (timeouts.create = "1s") ran out of time');
        expect(stepsOf(error!)).toEqual(['timeouts', 'create']);
        expect(took).toBeLessThan(20_000);
        // Nothing was created: the listing that comes before the create never succeeded.
        expect(JSON.stringify(emu.service.toJSON())).not.toContain('"slow"');
        const sent = emu.counts()['GET /client'] ?? 0;
        await new Promise((ok) => setImmediate(ok));
        expect(emu.counts()['GET /client'] ?? 0).toBe(sent); // no retry goes on after the answer
      } finally {
        emu.clearFaults();
      }
    },
    patient(60_000),
  );

  it(
    'a refresh past timeouts.read fails with "Timed out"; without the block the same refresh waits and succeeds',
    async () => {
      const state = (await core.converge('kms_client', null, {
        project_env: ENV,
        name: 'r',
        template: 'gold',
        timeouts: limits({ read: '300ms' }),
      }))!;
      emu.addFault({ method: 'GET', route: '/client', mode: 'delay', delayMs: 1500, times: 2 });
      try {
        const fresh = new Core(
          await startProvider({ cwd: dir, env: { KMS_API_URL: emu.url, KMS_API_KEY: API_KEY } }),
          schema,
        );
        expect(
          errors(
            (
              await fresh.p.call('ConfigureProvider', {
                terraform_version: '1.11.4',
                config: mp({ url: null, api_key: null, owner: null, base_dir: null, secret_store: dyn([]) }),
              })
            ).diagnostics,
          ),
        ).toEqual([]);
        const res = await fresh.p.call('ReadResource', { type_name: 'kms_client', current_state: mp(state) });
        expect(errors(res.diagnostics).map((d: any) => d.summary)).toEqual(['Timed out']);
        expect(await fresh.read('kms_client', { ...state, timeouts: null })).toMatchObject({ name: 'r' });
        fresh.p.kill();
      } finally {
        emu.clearFaults();
      }
    },
    patient(60_000),
  );

  it(
    'a change of the timeouts block alone is an update of the state only: no request',
    async () => {
      const config = core.config('kms_client', { project_env: ENV, name: 't', template: 'gold' });
      const prior = (
        await core.apply('kms_client', null, (await core.plan('kms_client', null, config)).planned, config)
      ).state!;
      const changed = { ...config, timeouts: limits({ update: '5m' }) };
      const plan = await core.plan('kms_client', prior, changed);
      expect(errors(plan.diagnostics)).toEqual([]);
      expect(plan.replace).toEqual([]);
      expect(plan.planned).toMatchObject({ ...prior, timeouts: limits({ update: '5m' }) });
      const before = JSON.stringify(emu.counts());
      const applied = await core.apply('kms_client', prior, plan.planned, changed);
      expect(errors(applied.diagnostics)).toEqual([]);
      expect(applied.state).toMatchObject({ timeouts: limits({ update: '5m' }), client_uuid: prior.client_uuid });
      expect(JSON.stringify(emu.counts())).toBe(before);
      expect(template.template_id).toBeTruthy();
    },
    patient(60_000),
  );
});
