// The provider applies `plan`'s ownership rules (model/ownership.ts) to clients it imports, driven
// the way Terraform core does against the built provider and the emulator, no terraform binary:
// - another configuration's client: read (import) yes; its update and delete are refused even when
//   an apply arrives without a plan that saw them (a saved plan, a live state that moved since),
//   and the object stays as it was; with take_ownership the update claims it;
// - a legacy client (kms-sync's marker, no owner id) is claimed by its first update: owner and
//   applied digest, as `plan` writes them;
// - a client made by hand (no marker) is updated but never stamped (adopting is not claiming).
import { readFileSync, rmSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startEmulator, type RunningEmulator } from '../../src/emulator/index.js';
import { APPLIED_KEY, appliedDigest, clientRecord, OWNER_ID_KEY } from '../../src/model/ownership.js';
import { RAW_KEY_PATTERN, repoRoot, workspace } from '../support/cli.js';
import { Core, dyn, errors, mp, startProvider, type Diagnostic, type ProviderProcess } from './harness.js';

const API_KEY = 'sk_test_ownrules0123456789';
const ENV = 'acme-production';
const schema = Object.values(
  JSON.parse(readFileSync(path.join(repoRoot, 'schemas', 'terraform-provider-kms.json'), 'utf8')).provider_schemas,
)[0] as Core['schema'];
const MARKER = { 'managed-by': 'kms-sync' };

let emu: RunningEmulator;
let dir: string;
const providers: ProviderProcess[] = [];
const seen: string[] = [];

async function provider(takeOwnership: boolean): Promise<Core> {
  const p = await startProvider({ cwd: dir, env: { KMS_API_URL: emu.url, KMS_API_KEY: API_KEY } });
  providers.push(p);
  const configured = await p.call('ConfigureProvider', {
    terraform_version: '1.11.4',
    config: mp({
      url: null,
      api_key: null,
      owner: 'team-b',
      base_dir: null,
      take_ownership: takeOwnership,
      secret_store: dyn([]),
    }),
  });
  expect(errors(configured.diagnostics)).toEqual([]);
  return new Core(p, schema);
}

const api = (method: string, route: string, body?: unknown) =>
  fetch(`${emu.url}${route}`, {
    method,
    headers: { 'x-api-key': API_KEY, 'content-type': 'application/json' },
    ...(body ? { body: JSON.stringify(body) } : {}),
  });
const liveClient = (name: string): any =>
  (emu.service.toJSON().projects[0] as any).envs[0].clients.find((c: any) => c.name === name);

async function imported(core: Core, name: string): Promise<Record<string, unknown>> {
  const { states, diagnostics } = await core.importState('kms_client', `${ENV}/${name}`);
  expect(errors(diagnostics)).toEqual([]);
  seen.push(JSON.stringify(states));
  return states[0]!;
}

/** An update of the metadata, applied as core applies a plan (the plan itself is not asked). */
async function applyMetadata(core: Core, prior: Record<string, unknown>, team: string) {
  const config = core.config('kms_client', {
    project_env: ENV,
    name: prior.name,
    template: 'gold',
    metadata: dyn({ team }),
  });
  const res = await core.apply('kms_client', prior, { ...prior, metadata: dyn({ team }) }, config);
  seen.push(JSON.stringify(res));
  return res;
}

const refusal = (diags: Diagnostic[]) => errors(diags).find((d) => d.summary === 'Owned by another configuration');

beforeAll(async () => {
  emu = await startEmulator({ port: 0, apiKeys: [API_KEY] });
  dir = workspace();
  expect(
    (
      await api('POST', '/project', {
        slug: 'acme',
        name: 'Acme',
        description: '',
        envs: [
          {
            type: 'production',
            url: 'https://api.acme.example',
            templates: [{ name: 'gold', rateLimitDay: 1000, maxClients: 10 }],
          },
        ],
      })
    ).status,
  ).toBeLessThan(300);
  const tpl = ((await (await api('GET', `/client/templates?project_env=${ENV}`)).json()) as any).data[0];
  for (const [name, metadata] of [
    ['theirs', { team: 'a', ...MARKER, [OWNER_ID_KEY]: 'team-a' }],
    ['legacy', { team: 'a', ...MARKER }],
    ['by-hand', { team: 'a' }],
  ] as const) {
    expect(
      (await api('POST', `/client?project_env=${ENV}`, { name, templateId: tpl.id, metadata })).status,
    ).toBeLessThan(300);
  }
});

afterAll(async () => {
  for (const p of providers) p.kill();
  await emu?.close();
  for (const s of seen) expect(s).not.toMatch(RAW_KEY_PATTERN);
  if (dir) rmSync(dir, { recursive: true, force: true });
});

describe('the provider on clients it did not create', () => {
  it("reads another configuration's client, but refuses to update or delete it, at plan and at apply", async () => {
    const core = await provider(false);
    const prior = await imported(core, 'theirs');
    const before = JSON.stringify(liveClient('theirs'));

    const planned = await core.plan(
      'kms_client',
      prior,
      core.config('kms_client', { project_env: ENV, name: 'theirs', template: 'gold', metadata: dyn({ team: 'b' }) }),
    );
    expect(refusal(planned.diagnostics)?.detail).toMatch(
      /owned by configuration 'team-a'.*not by this one \('team-b'\).*take_ownership = true/s,
    );
    const destroyPlan = await core.plan('kms_client', prior, null);
    expect(refusal(destroyPlan.diagnostics)?.detail).toMatch(/does not delete kms_client acme-production\/theirs/);

    expect(refusal((await applyMetadata(core, prior, 'b')).diagnostics)).toBeDefined();
    expect(refusal((await core.apply('kms_client', prior, null, null)).diagnostics)).toBeDefined();
    expect(JSON.stringify(liveClient('theirs'))).toBe(before);
  });

  it('claims it with take_ownership: owner and digest as plan writes them', async () => {
    const core = await provider(true);
    const res = await applyMetadata(core, await imported(core, 'theirs'), 'b');
    expect(errors(res.diagnostics)).toEqual([]);
    expect(liveClient('theirs').metadata).toEqual({
      team: 'b',
      ...MARKER,
      [OWNER_ID_KEY]: 'team-b',
      [APPLIED_KEY]: appliedDigest(clientRecord({ template: 'gold', metadata: { team: 'b' } })),
    });
  });

  it('claims a legacy client on its first update, and never stamps one made by hand', async () => {
    const core = await provider(false);
    expect(errors((await applyMetadata(core, await imported(core, 'legacy'), 'b')).diagnostics)).toEqual([]);
    expect(liveClient('legacy').metadata).toEqual({
      team: 'b',
      ...MARKER,
      [OWNER_ID_KEY]: 'team-b',
      [APPLIED_KEY]: appliedDigest(clientRecord({ template: 'gold', metadata: { team: 'b' } })),
    });

    expect(errors((await applyMetadata(core, await imported(core, 'by-hand'), 'b')).diagnostics)).toEqual([]);
    expect(liveClient('by-hand').metadata).toEqual({ team: 'b' });
  });
});
