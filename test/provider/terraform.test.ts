// The real terraform binary drives the provider offline, through a filesystem mirror: init, plan,
// apply, a no-op re-plan, drift made behind Terraform's back, import blocks with
// -generate-config-out, destroy; and a key whose store write fails after issuance (tainted, safe
// in the journal, replaced by the next apply). The state, the plan output and every output hold
// no raw key; the secret store does. Without terraform on PATH these tests are skipped, and say so.
import { cpSync, existsSync, mkdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startEmulator, type RunningEmulator } from '../../src/emulator/index.js';
import { SopsFileStore } from '../../src/secrets/index.js';
import { RAW_KEY_PATTERN, repoRoot, workspace } from '../support/cli.js';
import {
  decryptStore,
  expectOk,
  offlineTerraform,
  PROVIDER_VERSION as VERSION,
  NO_TERRAFORM,
  terraformOrSkip,
  type OfflineTerraform,
  type Run,
} from './terraform-support.js';
import { HCL_REQUIRED_PROVIDER, hclProjectEnvironment } from '../support/terraform-offline.js';
import { skipWhen } from '../support/skip.js';
import { patient, waitFor } from '../support/patience.js';

const TERRAFORM = terraformOrSkip();

const API_KEY = 'sk_test_terraform0123456789';
let emu: RunningEmulator;
let root: string;
let env: NodeJS.ProcessEnv;
let terraform: OfflineTerraform;

const tf = (cwd: string, ...args: string[]): Promise<Run> => terraform.run(cwd, args);

const api = (method: string, route: string, body?: unknown) =>
  fetch(`${emu.url}${route}`, {
    method,
    headers: { 'x-api-key': API_KEY, 'content-type': 'application/json' },
    ...(body ? { body: JSON.stringify(body) } : {}),
  });

describe.skipIf(skipWhen(!TERRAFORM, `test/provider/terraform.test.ts: ${NO_TERRAFORM}`))(
  'terraform drives terraform-provider-kms (offline, filesystem mirror)',
  () => {
    let main: string;

    beforeAll(async () => {
      emu = await startEmulator({ port: 0, apiKeys: [API_KEY] });
      root = workspace();
      terraform = offlineTerraform(TERRAFORM!, root, { url: emu.url, apiKey: API_KEY });
      env = terraform.env;
      main = path.join(root, 'main');
      mkdirSync(main);
      cpSync(path.join(repoRoot, 'examples', 'terraform', 'main.tf'), path.join(main, 'main.tf'));
      expectOk(await tf(main, 'init', '-input=false', '-no-color'), 'init');
    }, patient(120_000));

    afterAll(async () => {
      await emu?.close();
      for (const o of terraform?.outputs ?? []) expect(o).not.toMatch(RAW_KEY_PATTERN);
    });

    it(
      'plans, applies, and re-plans to no change',
      async () => {
        const plan = await tf(main, 'plan', '-input=false', '-no-color', '-detailed-exitcode', '-out=tfplan');
        expect(plan.code, plan.stderr).toBe(2);
        expect(plan.stdout).toMatch(/Plan: 6 to add, 0 to change, 0 to destroy/);
        expectOk(await tf(main, 'apply', '-input=false', '-no-color', 'tfplan'), 'apply');
        const again = await tf(main, 'plan', '-input=false', '-no-color', '-detailed-exitcode');
        expect(again.code, `${again.stdout}\n${again.stderr}`).toBe(0);
        expect(again.stdout).toMatch(/No changes/);
      },
      patient(120_000),
    );

    it(
      'keeps the raw key out of the state and the outputs, and in the store',
      async () => {
        const state = readFileSync(path.join(main, 'terraform.tfstate'), 'utf8');
        expect(state).not.toMatch(RAW_KEY_PATTERN);
        const out = await tf(main, 'output', '-json');
        expectOk(out, 'output');
        const key = JSON.parse(out.stdout).globex_key.value;
        expect(key.prefix).toMatch(/^kmsc_/);
        const store = new SopsFileStore(path.join(main, '.kms-sync', 'secrets.sops.yaml'), { env } as never);
        const raw = await store.read('acme-production/globex/primary');
        expect(raw).toMatch(RAW_KEY_PATTERN);
        expect(raw!.startsWith(key.prefix)).toBe(true);
        expect(state).not.toContain(raw!);
        expect(JSON.parse(state).resources.find((r: any) => r.type === 'kms_key').instances[0].attributes.key_id).toBe(
          key.id,
        );
      },
      patient(60_000),
    );

    it(
      'shows drift made behind its back and repairs it',
      async () => {
        const state = JSON.parse(readFileSync(path.join(main, 'terraform.tfstate'), 'utf8'));
        const uuid = state.resources.find((r: any) => r.type === 'kms_client').instances[0].attributes.client_uuid;
        expect(
          (await api('PUT', `/client/${uuid}?project_env=acme-production`, { ipWhitelist: ['192.168.0.0/16'] })).status,
        ).toBe(200);
        expect(
          (await api('DELETE', `/endpoint/${encodeURIComponent('GET:/v1/orders')}?project_env=acme-production`)).status,
        ).toBe(200);
        // The apply shows the plan it carries out: the drift, then the repair (one terraform run, not a plan before it).
        const repair = await tf(main, 'apply', '-input=false', '-no-color', '-auto-approve');
        expectOk(repair, 'apply (repair)');
        expect(repair.stdout).toMatch(/kms_endpoint\.list_orders will be created/);
        expect(repair.stdout).toMatch(/"192\.168\.0\.0\/16"/);
        expect(repair.stdout).toMatch(/Plan: 1 to add, 1 to change, 0 to destroy/);
        expect(repair.stdout).toMatch(/Apply complete! Resources: 1 added, 1 changed, 0 destroyed/);
        expect((await tf(main, 'plan', '-input=false', '-no-color', '-detailed-exitcode')).code).toBe(0);
      },
      patient(120_000),
    );

    it(
      'imports by natural id and generates the configuration',
      async () => {
        // The example alone in an empty folder: it names the provider's source (else init looks for hashicorp/kms).
        const example = readFileSync(path.join(repoRoot, 'examples', 'terraform', 'import.tf.example'), 'utf8');
        expect(example).toContain(`version = "${VERSION}"`);
        const adopt = await terraform.init('adopt', { 'import.tf': example });
        const plan = await tf(adopt, 'plan', '-input=false', '-no-color', '-generate-config-out=generated.tf');
        expectOk(plan, 'plan -generate-config-out');
        expect(plan.stdout).toMatch(/3 to import/);
        const generated = readFileSync(path.join(adopt, 'generated.tf'), 'utf8');
        expect(generated).toMatch(/resource "kms_client" "globex"/);
        expect(generated).toMatch(/template\s+= "gold"/);
        expect(generated).toMatch(/path\s+= "\/v1\/orders"/);
        expect(generated).not.toMatch(RAW_KEY_PATTERN);
        expectOk(await tf(adopt, 'apply', '-input=false', '-no-color', '-auto-approve'), 'apply (import)');
        expect(readFileSync(path.join(adopt, 'terraform.tfstate'), 'utf8')).toMatch(/"client_uuid"/);
        // The first plan after the import is empty: the generated configuration spells expiry and
        // unset flags as the provider reads them back.
        const after = await tf(adopt, 'plan', '-input=false', '-no-color', '-detailed-exitcode');
        expect(after.code, after.stdout + after.stderr).toBe(0);
        expect(after.stdout).toContain('No changes.');
      },
      patient(120_000),
    );

    it(
      'an import of a key configured by hand plans no change: its expiry spelled as configurations do, auto_rotate off as unset',
      async () => {
        // A key with an absolute expiry in whole seconds and no auto_rotate, written as people write
        // them; Terraform forgets it, and an import block takes it back with the same configuration.
        const legacy = `resource "kms_key" "legacy" {\n  project_env  = kms_client.globex.project_env\n  client       = kms_client.globex.name\n  name         = "legacy"\n  expires_at   = "2030-01-01T00:00:00Z"\n}\n`;
        writeFileSync(path.join(main, 'legacy.tf'), legacy);
        expectOk(await tf(main, 'apply', '-input=false', '-no-color', '-auto-approve'), 'apply legacy key');
        expectOk(await tf(main, 'state', 'rm', '-no-color', 'kms_key.legacy'), 'state rm');
        writeFileSync(
          path.join(main, 'legacy.tf'),
          `${legacy}\nimport {\n  to = kms_key.legacy\n  id = "acme-production/globex/legacy"\n}\n`,
        );
        // The apply shows its plan (an import, nothing else) and carries it out.
        const imported = await tf(main, 'apply', '-input=false', '-no-color', '-auto-approve');
        expectOk(imported, 'apply import');
        expect(imported.stdout).toContain('Plan: 1 to import, 0 to add, 0 to change, 0 to destroy.');
        expect(imported.stdout).toContain('Apply complete! Resources: 1 imported, 0 added, 0 changed, 0 destroyed.');
        const state = JSON.parse(readFileSync(path.join(main, 'terraform.tfstate'), 'utf8'));
        const attrs = state.resources.find((r: { name: string }) => r.name === 'legacy').instances[0].attributes;
        expect(attrs).toMatchObject({ expires_at: '2030-01-01T00:00:00Z', auto_rotate: null });
        const again = await tf(main, 'plan', '-input=false', '-no-color', '-detailed-exitcode');
        expect(again.code, again.stdout + again.stderr).toBe(0);
        // Naming the default store ("local") where the import left it unset is the same store: an
        // update of the state, not a replacement that would revoke the imported key and issue another.
        const keyId = attrs.key_id;
        writeFileSync(
          path.join(main, 'legacy.tf'),
          legacy.replace('  expires_at', '  secret_store = "local"\n  expires_at'),
        );
        const named = await tf(main, 'apply', '-input=false', '-no-color', '-auto-approve');
        expectOk(named, 'apply secret_store = "local"');
        expect(named.stdout).toContain('Apply complete! Resources: 0 added, 1 changed, 0 destroyed.');
        const after = JSON.parse(readFileSync(path.join(main, 'terraform.tfstate'), 'utf8')).resources.find(
          (r: { name: string }) => r.name === 'legacy',
        ).instances[0].attributes;
        expect(after).toMatchObject({ key_id: keyId, secret_store: 'local' });
      },
      patient(120_000),
    );

    it(
      'kms_clients lists every live client, two of one name included; kms_client refuses to pick one of them',
      async () => {
        // Two clients named walk-in made in the service by hand (not managed here): both listed.
        const template = (emu.service.toJSON().projects as any[])[0].envs[0].templates[0].id;
        const made: string[] = [];
        for (const type of ['company', 'person']) {
          const res = await api('POST', '/client?project_env=acme-production', {
            name: 'walk-in',
            type,
            templateId: template,
            keys: [],
          });
          expect(res.status).toBe(201);
          made.push(((await res.json()) as { id: string }).id);
        }
        const clientsTf = path.join(main, 'clients.tf');
        writeFileSync(
          clientsTf,
          `data "kms_clients" "all" {\n  project_env = kms_environment.production.project_env\n}\n` +
            `output "walk_ins" {\n  value = [for c in data.kms_clients.all.clients : { id = c.client_uuid, type = c.type } if c.name == "walk-in"]\n}\n`,
        );
        try {
          // -refresh=false: only the data source is read (the managed objects are as the last test left them).
          expectOk(
            await tf(main, 'apply', '-input=false', '-no-color', '-auto-approve', '-refresh=false'),
            'apply (data source)',
          );
          const out = await tf(main, 'output', '-json', 'walk_ins');
          expectOk(out, 'output walk_ins');
          expect(JSON.parse(out.stdout)).toEqual(
            [
              { id: made[0]!, type: 'company' },
              { id: made[1]!, type: 'person' },
            ].sort((a, b) => a.id.localeCompare(b.id)),
          );
          writeFileSync(
            clientsTf,
            `data "kms_client" "walk_in" {\n  project_env = kms_environment.production.project_env\n  name        = "walk-in"\n}\n`,
          );
          const one = await tf(main, 'plan', '-input=false', '-no-color', '-refresh=false');
          expect(one.code, one.stdout).not.toBe(0);
          expect(one.stderr.replace(/\s*│\s*/g, ' ')).toMatch(/2 live clients of acme-production are named walk-in/);
        } finally {
          rmSync(clientsTf, { force: true });
          for (const id of made) await api('DELETE', `/client/${id}?project_env=acme-production`);
        }
      },
      patient(120_000),
    );

    it(
      'destroys everything it created',
      async () => {
        expectOk(await tf(main, 'destroy', '-input=false', '-no-color', '-auto-approve'), 'destroy');
        expect(emu.service.toJSON().projects).toEqual([]);
        expect(existsSync(path.join(main, 'terraform.tfstate'))).toBe(true);
        expect(JSON.parse(readFileSync(path.join(main, 'terraform.tfstate'), 'utf8')).resources).toEqual([]);
      },
      patient(120_000),
    );

    it(
      'fails a key whose store write fails after issuance, keeps it tainted and safe in the journal, and replaces it on the next apply',
      async () => {
        const dir = await terraform.init('tainted', {
          'main.tf': `${HCL_REQUIRED_PROVIDER}
provider "kms" {}
${hclProjectEnvironment({ slug: 'taint', name: 'Taint', type: 'production', url: 'https://api.taint.example' })}
resource "kms_template" "t" {
  project_env    = kms_environment.e.project_env
  name           = "std"
  rate_limit_day = 1000
  max_clients    = 10
}
resource "kms_client" "c" {
  project_env = kms_environment.e.project_env
  name        = "c1"
  template    = kms_template.t.name
}
resource "kms_key" "k" {
  project_env = kms_client.c.project_env
  client      = kms_client.c.name
  name        = "primary"
}
`,
        });
        const storeFile = path.join(dir, '.kms-sync', 'secrets.sops.yaml');
        const journal = path.join(dir, '.kms-sync', 'journal');
        // The service commits the key and holds its response; meanwhile the store path becomes a directory.
        emu.addFault({
          method: 'PUT',
          route: '/client/{client_uuid}',
          mode: 'delay-after-commit',
          delayMs: 1_000,
          times: 1,
        });
        emu.resetCounts();
        const applying = tf(dir, 'apply', '-input=false', '-no-color', '-auto-approve');
        await waitFor(() => Boolean(emu.counts()['PUT /client/{client_uuid}']), 60_000);
        mkdirSync(storeFile, { recursive: true });
        writeFileSync(path.join(storeFile, 'x'), 'not a store');
        const failed = await applying;
        emu.clearFaults();
        rmSync(storeFile, { recursive: true, force: true });
        expect(failed.code, failed.stdout).not.toBe(0);
        expect(failed.stderr).toMatch(/Key issued, secret store write failed/);
        expect(failed.stderr).toMatch(/safe in the journal/);
        expect(statSync(journal).size).toBeGreaterThan(0);
        const key = JSON.parse(readFileSync(path.join(dir, 'terraform.tfstate'), 'utf8')).resources.find(
          (r: any) => r.type === 'kms_key',
        ).instances[0];
        expect(key.status).toBe('tainted');

        const plan = await tf(dir, 'plan', '-input=false', '-no-color');
        expect(plan.stdout).toMatch(/kms_key\.k is tainted, so must be\s+replaced/);
        expectOk(
          await tf(dir, 'apply', '-input=false', '-no-color', '-auto-approve'),
          'apply (replace the tainted key)',
        );
        const state = JSON.parse(readFileSync(path.join(dir, 'terraform.tfstate'), 'utf8'));
        const replaced = state.resources.find((r: any) => r.type === 'kms_key').instances[0];
        expect(replaced.status).toBeUndefined();
        expect(replaced.attributes.key_id).not.toBe(key.attributes.key_id);
        // Only the replacement is live, and the store holds it.
        const live = (emu.service.toJSON().projects as any[]).find((p) => p.slug === 'taint').envs[0].clients[0].keys;
        expect(live.map((k: any) => k.id)).toEqual([replaced.attributes.key_id]);
        const raw = (await decryptStore(storeFile, env.SOPS_AGE_KEY_FILE!))['taint-production/c1/primary']!;
        expect(raw.startsWith(replaced.attributes.key_prefix)).toBe(true);
        expect(readFileSync(path.join(dir, 'terraform.tfstate'), 'utf8')).not.toContain(raw);
      },
      patient(180_000),
    );
  },
);
