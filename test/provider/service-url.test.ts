// The provider block is configuration a pull request edits; KMS_API_KEY in terraform's environment
// is the operator's. A block's `url` must not choose where the operator's key is sent: with the key
// from the environment, the service is the one KMS_API_URL names (a block's url naming another is
// refused before any request). A block that brings its own `api_key` (a variable) keeps its url.
// Nor does its `base_dir` choose where store files go: out of the folder terraform runs in, it
// needs the operator policy's stores.outsideRoot, as a store file there does.
// Real terraform, offline (filesystem mirror); skipped, and said, without it.
import { createServer, type IncomingHttpHeaders } from 'node:http';
import type { AddressInfo } from 'node:net';
import { rmSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startEmulator, type RunningEmulator } from '../../src/emulator/index.js';
import { RAW_KEY_PATTERN, workspace } from '../support/cli.js';
import { skipWhen } from '../support/skip.js';
import { patient } from '../support/patience.js';
import {
  NO_TERRAFORM,
  offlineTerraform,
  PROVIDER_VERSION,
  terraformOrSkip,
  type OfflineTerraform,
} from './terraform-support.js';

const TERRAFORM = terraformOrSkip();
const API_KEY = 'sk_test_tfserviceurl0123456789';

const config = (provider: string) => `terraform {
  required_providers {
    kms = { source = "kms-sync/kms", version = "${PROVIDER_VERSION}" }
  }
}
variable "kms_api_key" {
  type      = string
  default   = null
  sensitive = true
}
provider "kms" {
${provider}}
resource "kms_project" "shop" {
  slug = "shop"
  name = "Shop"
}
`;

describe.skipIf(skipWhen(!TERRAFORM, `test/provider/service-url.test.ts: ${NO_TERRAFORM}`))(
  "a provider block's url and base_dir do not choose where KMS_API_KEY and store files go",
  () => {
    let emu: RunningEmulator;
    let terraform: OfflineTerraform;
    let root: string;
    const seen: IncomingHttpHeaders[] = [];
    const server = createServer((req, res) => {
      seen.push(req.headers);
      res.writeHead(404, { 'content-type': 'application/json' }).end('{"code":"NOT_FOUND"}');
    });
    let elsewhere: string;

    beforeAll(async () => {
      emu = await startEmulator({ port: 0, apiKeys: [API_KEY] });
      await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
      elsewhere = `http://127.0.0.1:${(server.address() as AddressInfo).port}/api/v1`;
      root = workspace();
      terraform = offlineTerraform(TERRAFORM!, root, { url: emu.url, apiKey: API_KEY });
    }, patient(60_000));

    afterAll(async () => {
      await emu?.close();
      server.closeAllConnections();
      await new Promise((r) => server.close(r));
      for (const o of terraform?.outputs ?? []) expect(o).not.toContain(API_KEY);
      for (const o of terraform?.outputs ?? []) expect(o).not.toMatch(RAW_KEY_PATTERN);
      rmSync(root, { recursive: true, force: true });
    });

    it(
      'url naming another service than KMS_API_URL, with KMS_API_KEY from the environment: refused, nothing sent there',
      async () => {
        const dir = await terraform.init('pr', { 'main.tf': config(`  url = "${elsewhere}"\n`) });
        const plan = await terraform.run(dir, ['plan', '-input=false', '-no-color']);
        const shown = (plan.stdout + plan.stderr).replace(/\s+/g, ' ');
        expect(plan.code, shown).toBe(1);
        expect(shown).toContain('Error: Service URL not allowed');
        expect(shown).toContain('KMS_API_KEY');
        expect(seen).toEqual([]);
      },
      patient(120_000),
    );

    it(
      'base_dir out of the folder terraform runs in: refused unless the operator allows store files outside',
      async () => {
        const dir = await terraform.init('moved', { 'main.tf': config('  base_dir = "../elsewhere"\n') });
        const plan = await terraform.run(dir, ['plan', '-input=false', '-no-color']);
        const shown = (plan.stdout + plan.stderr).replace(/\s+/g, ' ');
        expect(plan.code, shown).toBe(1);
        expect(shown).toContain('Error: Store folder refused by the operator policy');
        expect(shown).toContain('KMS_SYNC_STORES_OUTSIDE_ROOT=1');
        const allowed = await terraform.run(dir, ['plan', '-input=false', '-no-color'], {
          KMS_SYNC_STORES_OUTSIDE_ROOT: '1',
        });
        expect(allowed.code, allowed.stdout + allowed.stderr).toBe(0);
        // Inside it, base_dir needs nothing.
        const inside = await terraform.init('inside', { 'main.tf': config('  base_dir = "./state"\n') });
        const insidePlan = await terraform.run(inside, ['plan', '-input=false', '-no-color']);
        expect(insidePlan.code, insidePlan.stdout + insidePlan.stderr).toBe(0);
      },
      patient(120_000),
    );

    it(
      'the same url as KMS_API_URL, or a url with its own api_key, is used',
      async () => {
        const same = await terraform.init('same', { 'main.tf': config(`  url = "${emu.url}/"\n`) });
        const plan = await terraform.run(same, ['plan', '-input=false', '-no-color']);
        expect(plan.code, plan.stdout + plan.stderr).toBe(0);
        const own = await terraform.init('own', {
          'main.tf': config(`  url     = "${elsewhere}"\n  api_key = var.kms_api_key\n`),
        });
        const ownPlan = await terraform.run(own, ['plan', '-input=false', '-no-color'], {
          TF_VAR_kms_api_key: 'sk_test_thesecondservicekey00',
        });
        expect(ownPlan.code).toBe(1); // the logging server answers 404
        expect(seen.length).toBeGreaterThan(0);
        expect(seen.map((h) => h['x-api-key'])).not.toContain(API_KEY);
      },
      patient(120_000),
    );
  },
);
