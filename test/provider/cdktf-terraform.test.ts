// The CDKTF example stack, synthesized the way `cdktf synth` does it (its app under plain node,
// CDKTF_OUTDIR in a temporary folder, through src/cdktf's runApp) and then applied by the real
// terraform binary through the provider, offline via a filesystem mirror, in the synthesized
// stack folder as `cdktf deploy` runs it: init, apply, a no-op re-plan, destroy (refused while
// resources are protected). The state, cdktf.out and every output hold no raw key; the secret
// store does, and each stored key validates at the service. Skipped, loudly, without terraform.
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { readCdktfJson, runApp } from '../../src/cdktf/synth.js';
import { startEmulator, type RunningEmulator } from '../../src/emulator/index.js';
import { RAW_KEY_PATTERN, repoRoot, runCli, workspace } from '../support/cli.js';
import {
  decryptStore,
  expectOk,
  filesUnder,
  offlineTerraform,
  NO_TERRAFORM,
  terraformOrSkip,
  type OfflineTerraform,
} from './terraform-support.js';
import { skipWhen } from '../support/skip.js';
import { patient } from '../support/patience.js';

const TERRAFORM = terraformOrSkip();

const API_KEY = 'sk_test_cdktfdeploy0123456789';
const EXAMPLE = path.join(repoRoot, 'examples', 'cdktf');
/** Where cdktf's default local backend points (the app's folder): this test must not write there. */
const EXAMPLE_STATE = path.join(EXAMPLE, 'terraform.acme.tfstate');

let emu: RunningEmulator;
let terraform: OfflineTerraform;
let outDir: string;
let appDir: string;
let stackDir: string;
let stateFile: string;
let exampleStateBefore: boolean;
/** What the kms-sync CLI printed here. */
const printedByCli: string[] = [];
/** Raw values read from the store, to look for anywhere they must not be. */
const rawValues = new Set<string>();

const tf = (...args: string[]) => terraform.run(stackDir, [...args, '-input=false', '-no-color']);

interface StateResource {
  type: string;
  name: string;
  instances: { attributes: Record<string, any> }[];
}
const resources = (): StateResource[] => JSON.parse(readFileSync(stateFile, 'utf8')).resources;
const ofType = (type: string) =>
  resources()
    .filter((r) => r.type === type)
    .map((r) => r.instances[0]!.attributes);

describe.skipIf(skipWhen(!TERRAFORM, `test/provider/cdktf-terraform.test.ts: ${NO_TERRAFORM}`))(
  'a CDKTF stack synthesized and applied by terraform through terraform-provider-kms',
  () => {
    beforeAll(async () => {
      emu = await startEmulator({ port: 0, apiKeys: [API_KEY] });
      const root = workspace();
      terraform = offlineTerraform(TERRAFORM!, root, { url: emu.url, apiKey: API_KEY });
      exampleStateBefore = existsSync(EXAMPLE_STATE);
      // The app folder as cdktf lays it out: cdktf.json beside cdktf.out. The provider keeps the key
      // store and journal there, not in the generated (git-ignored, often deleted) cdktf.out.
      appDir = root;
      writeFileSync(path.join(appDir, 'cdktf.json'), readFileSync(path.join(EXAMPLE, 'cdktf.json')));
      outDir = path.join(root, 'cdktf.out');
      await runApp(await readCdktfJson(EXAMPLE), outDir, { PATH: process.env.PATH, HOME: root });
      const manifest = JSON.parse(readFileSync(path.join(outDir, 'manifest.json'), 'utf8'));
      stackDir = path.join(outDir, manifest.stacks.acme.workingDirectory ?? path.join('stacks', 'acme'));
      stateFile = path.join(stackDir, 'terraform.acme.tfstate');
      // cdktf's default local backend holds an absolute path into the app's folder; keep the state here.
      expectOk(await tf('init', `-backend-config=path=${stateFile}`), 'init');
    }, patient(120_000));

    afterAll(async () => {
      await emu?.close();
      const printed = [...(terraform?.outputs ?? []), ...printedByCli];
      for (const o of printed) {
        expect(o).not.toMatch(RAW_KEY_PATTERN);
        for (const raw of rawValues) expect(o.includes(raw)).toBe(false);
      }
    });

    it(
      'applies the stack, then re-plans to no change',
      async () => {
        const apply = await tf('apply', '-auto-approve');
        expectOk(apply, 'apply');
        expect(apply.stdout).toMatch(/Apply complete! Resources: 39 added, 0 changed, 0 destroyed/);
        const again = await tf('plan', '-detailed-exitcode');
        expect(again.code, `${again.stdout}\n${again.stderr}`).toBe(0);
        expect(again.stdout).toMatch(/No changes/);
        const live = emu.service.toJSON().projects as any[];
        expect(live.map((p) => p.slug)).toEqual(['acme']);
      },
      patient(240_000),
    );

    it(
      'keeps raw keys out of the state, cdktf.out and every output; the store holds them and they validate',
      async () => {
        const keys = ofType('kms_key');
        expect(keys).toHaveLength(12);
        const stored = await decryptStore(
          path.join(appDir, '.kms-sync', 'secrets.sops.yaml'),
          terraform.env.SOPS_AGE_KEY_FILE!,
        );
        expect(existsSync(path.join(stackDir, '.kms-sync')), 'nothing of the store or journal in cdktf.out').toBe(
          false,
        );
        const clients = new Map(ofType('kms_client').map((c) => [`${c.project_env}/${c.name}`, c]));
        const endpoints = ofType('kms_endpoint');
        for (const k of keys) {
          const raw = stored[k.secret_name];
          expect(raw, `store entry ${k.secret_name}`).toMatch(RAW_KEY_PATTERN);
          rawValues.add(raw!);
          expect(k.key_prefix).toMatch(/^kmsc_/);
          expect(raw!.startsWith(k.key_prefix)).toBe(true);
          // The service takes the stored value as this client's key of this name.
          const client = clients.get(`${k.project_env}/${k.client}`)!;
          // A client with an allow-list is asked from an address inside it (its first entry's first host).
          const allowed = client.ip_whitelist?.[0];
          const from = allowed
            ? {
                'x-forwarded-for': String(allowed)
                  .replace(/\/\d+$/, '')
                  .replace(/\.0$/, '.1')
                  .replace(/::$/, '::1'),
              }
            : {};
          const methodPath = endpoints.find((e) => e.project_env === k.project_env)!.method_path;
          const res = await fetch(
            `${emu.url}/client/${client.client_uuid}?project_env=${k.project_env}&method_path=${encodeURIComponent(methodPath)}`,
            {
              method: 'POST',
              headers: { 'x-api-key': API_KEY, 'content-type': 'application/json' },
              body: JSON.stringify({ name: k.name, headers: { 'x-api-key': raw, ...from } }),
            },
          );
          expect(await res.json(), `validation of ${k.secret_name}`).toMatchObject({ success: true });
        }
        expect(rawValues.size).toBe(12);

        const out = await terraform.run(stackDir, ['output', '-json']);
        expectOk(out, 'output');
        expect(readFileSync(stateFile, 'utf8')).not.toMatch(RAW_KEY_PATTERN);
        // Everything under cdktf.out: the synthesized stack, .terraform and the state.
        const files = filesUnder(outDir);
        expect(files).toContain(stateFile);
        for (const f of files) {
          const text = readFileSync(f, 'latin1');
          expect(text, f).not.toMatch(RAW_KEY_PATTERN);
          for (const raw of rawValues) expect(text.includes(raw), f).toBe(false);
        }
        expect(existsSync(EXAMPLE_STATE)).toBe(exampleStateBefore);
      },
      patient(120_000),
    );

    it(
      'kms-sync drift --cdktf-out of the deployed stack reads the digests the provider wrote: no drift, then an undeployed edit is pending',
      async () => {
        const drift = async () => {
          const r = await runCli(['drift', '--cdktf-out', outDir, '--format', 'json'], {
            cwd: appDir,
            env: { ...terraform.env, KMS_SYNC_ALLOW_LOCAL_STORE: '1' },
          });
          printedByCli.push(r.stdout, r.stderr);
          expect([0, 2], `drift:\n${r.stdout}\n${r.stderr}`).toContain(r.code);
          return {
            code: r.code,
            items: (JSON.parse(r.stdout) as { items: { category: string; address: string }[] }).items,
          };
        };
        const clean = await drift();
        expect(clean.items.filter((i) => i.category === 'changed_outside' || i.category === 'pending')).toEqual([]);

        // An edit of one client's metadata in the synthesized stack, not deployed: pending.
        const stackFile = path.join(stackDir, 'cdk.tf.json');
        const original = readFileSync(stackFile, 'utf8');
        const stack = JSON.parse(original);
        const [logicalId, edited] = Object.entries(stack.resource.kms_client as Record<string, any>).find(
          ([, c]) => c.metadata && typeof c.metadata === 'object',
        )!;
        stack.resource.kms_client[logicalId] = { ...edited, metadata: { ...edited.metadata, edited: 'not deployed' } };
        writeFileSync(stackFile, JSON.stringify(stack, null, 2));
        try {
          const pending = await drift();
          const item = pending.items.find(
            (i) => i.address.startsWith('client.') && i.address.endsWith(`/${edited.name}`),
          );
          expect(item, JSON.stringify(pending.items)).toMatchObject({ category: 'pending' });
          expect(pending.items.filter((i) => i.category === 'changed_outside')).toEqual([]);
        } finally {
          writeFileSync(stackFile, original);
        }
      },
      patient(120_000),
    );

    it(
      'refuses to destroy protected resources, and destroys the stack once they are unprotected',
      async () => {
        // Deletes approved past the deletion guard (tested below): the protection alone refuses.
        const refused = await terraform.run(stackDir, ['destroy', '-auto-approve', '-input=false', '-no-color'], {
          KMS_SYNC_APPROVE_DELETES: '1',
        });
        expect(refused.code).not.toBe(0);
        expect(refused.stderr).toMatch(/Protected resource/);
        expect(refused.stderr).toMatch(/kms_client acme-production\/checkout-service is protected/);
        expect(emu.service.toJSON().projects).toHaveLength(1);
        expect(ofType('kms_key')).toHaveLength(12);

        // What a user does: protected = false in the stack, synth, apply, destroy.
        const stackFile = path.join(stackDir, 'cdk.tf.json');
        const stack = JSON.parse(readFileSync(stackFile, 'utf8'));
        for (const byName of Object.values(stack.resource) as Record<string, any>[])
          for (const r of Object.values(byName)) if (r.protected) r.protected = false;
        writeFileSync(stackFile, JSON.stringify(stack, null, 2));
        const unprotect = await tf('apply', '-auto-approve');
        expectOk(unprotect, 'apply (unprotect)');
        expect(unprotect.stdout).toMatch(/Resources: 0 added, 3 changed, 0 destroyed/);

        // The whole stack is more than the deletion guard lets one plan delete: refused at plan,
        // nothing deleted, until the operator approves the run from the environment.
        const guarded = await tf('destroy', '-auto-approve');
        expect(guarded.code).not.toBe(0);
        expect(guarded.stderr).toMatch(/Deletion guard/);
        expect(ofType('kms_key')).toHaveLength(12);
        expectOk(
          await terraform.run(stackDir, ['destroy', '-auto-approve', '-input=false', '-no-color'], {
            KMS_SYNC_MAX_DELETES: '100',
          }),
          'destroy',
        );
        expect(emu.service.toJSON().projects).toEqual([]);
        expect(resources()).toEqual([]);
      },
      patient(240_000),
    );
  },
);
