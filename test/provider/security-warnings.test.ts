// Issue 34: Terraform's plan has no section for security changes, so the provider shows the
// provider block's as a warning of `terraform plan`: a pull request that adds a store for its
// author and adds that author as a recipient of the store holding the keys is visible in the
// plan, not only in the `.tf` diff. Real terraform, offline (filesystem mirror); skipped, and
// said, without it.
import { mkdirSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { generateX25519Identity, identityToRecipient } from 'age-encryption';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startEmulator, type RunningEmulator } from '../../src/emulator/index.js';
import { RAW_KEY_PATTERN, workspace } from '../support/cli.js';
import { skipWhen } from '../support/skip.js';
import {
  NO_TERRAFORM,
  offlineTerraform,
  PROVIDER_VERSION,
  terraformOrSkip,
  type OfflineTerraform,
  type Run,
} from './terraform-support.js';
import { patient } from '../support/patience.js';

const TERRAFORM = terraformOrSkip();
const API_KEY = 'sk_test_tfsecuritywarnings0123';

const config = (stores: string) => `terraform {
  required_providers {
    kms = { source = "kms-sync/kms", version = "${PROVIDER_VERSION}" }
  }
}
provider "kms" {
${stores}}
resource "kms_project" "shop" {
  slug = "shop"
  name = "Shop"
}
resource "kms_environment" "staging" {
  project = kms_project.shop.slug
  type    = "staging"
  url     = "https://s.example"
}
resource "kms_template" "std" {
  project_env    = kms_environment.staging.project_env
  name           = "std"
  rate_limit_day = 10
}
resource "kms_client" "web" {
  project_env = kms_environment.staging.project_env
  name        = "web"
  template    = kms_template.std.name
}
resource "kms_key" "main" {
  project_env = kms_client.web.project_env
  client      = kms_client.web.name
  name        = "main"
}
`;
const local = (options = '') =>
  `  secret_store {\n    name    = "local"\n    uri     = "sops:.kms-sync/secrets.sops.yaml"\n    default = true\n${options}  }\n`;

describe.skipIf(skipWhen(!TERRAFORM, `test/provider/security-warnings.test.ts: ${NO_TERRAFORM}`))(
  'terraform plan shows the security changes of the provider block',
  () => {
    let emu: RunningEmulator;
    let terraform: OfflineTerraform;
    let dir: string;
    const ok = (r: Run, what: string) => expect(r.code, `${what}:\n${r.stdout}\n${r.stderr}`).toBe(0);

    beforeAll(async () => {
      emu = await startEmulator({ port: 0, apiKeys: [API_KEY] });
      const root = workspace();
      terraform = offlineTerraform(TERRAFORM!, root, { url: emu.url, apiKey: API_KEY });
      dir = path.join(root, 'tf');
      mkdirSync(dir);
      writeFileSync(path.join(dir, 'main.tf'), config(local()));
      ok(await terraform.run(dir, ['init', '-input=false', '-no-color']), 'init');
    }, patient(120_000));

    afterAll(async () => {
      await emu?.close();
      for (const o of terraform?.outputs ?? []) expect(o).not.toMatch(RAW_KEY_PATTERN);
    });

    it(
      'a store and a recipient added by a pull request are a warning of the plan; the applied stores are not',
      async () => {
        const first = await terraform.run(dir, ['apply', '-input=false', '-no-color', '-auto-approve']);
        ok(first, 'apply');
        const again = await terraform.run(dir, ['plan', '-input=false', '-no-color', '-detailed-exitcode']);
        expect(again.code, again.stdout + again.stderr).toBe(0);
        expect(again.stdout + again.stderr).not.toContain('Security changes');

        const attacker = await identityToRecipient(await generateX25519Identity());
        writeFileSync(
          path.join(dir, 'main.tf'),
          config(
            local(`    options = { recipients = ["${attacker}"] }\n`) +
              `  secret_store {\n    name    = "audit"\n    uri     = "sops:audit.sops.yaml"\n    options = { recipients = ["${attacker}"] }\n  }\n`,
          ),
        );
        const plan = await terraform.run(dir, ['plan', '-input=false', '-no-color']);
        ok(plan, 'plan');
        const shown = (plan.stdout + plan.stderr).replace(/\s+/g, ' '); // Terraform wraps the detail
        expect(shown).toContain('Warning: Security changes (3): the secret stores of the provider block');
        expect(shown).toContain(`- store audit: new (sops:audit.sops.yaml {"recipients":["${attacker}"]})`);
        expect(shown).toContain(
          `- store local: + recipient ${attacker} (could decrypt the 1 secret(s) it holds now: apply needs KMS_SYNC_ALLOW_NEW_RECIPIENTS=1)`,
        );
        expect(shown).toContain(
          '- store local: changed from sops:.kms-sync/secrets.sops.yaml to sops:.kms-sync/secrets.sops.yaml {"recipients"',
        );
      },
      patient(180_000),
    );

    afterAll(() => rmSync(dir, { recursive: true, force: true }));
  },
);
