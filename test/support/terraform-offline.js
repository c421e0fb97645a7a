// The terraform (or tofu) binary run offline against a built terraform-provider-kms: a launcher
// named as Terraform expects in a filesystem mirror, a CLI configuration that installs from it
// (`init` ignores dev_overrides), HOME and TF_CLI_CONFIG_FILE of its own (these machines preset
// TF_CLI_CONFIG_FILE to a file that does not exist), no checkpoint call. Plain JavaScript so that
// the bench (plain node) and the tests (test/provider/terraform-support.ts, test/crash/terraform.ts)
// share one copy; types in terraform-offline.d.ts.
import { execFileSync } from 'node:child_process';
import { chmodSync, mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';

/** The provider's version in the mirror and in every `required_providers` of the tests. */
export const PROVIDER_VERSION = '0.1.0';

/** The terraform (or tofu) binary on PATH, or undefined. */
export function findTerraform() {
  for (const bin of ['terraform', 'tofu']) {
    try {
      const p = execFileSync('sh', ['-c', `command -v ${bin}`], { encoding: 'utf8' }).trim();
      if (p) return p;
    } catch {
      // not there
    }
  }
  return undefined;
}

/**
 * Puts a launcher of `providerBin` (run with this Node.js) into a filesystem mirror under `root`,
 * writes the CLI configuration that installs from it, and returns the environment terraform runs
 * with: HOME is `root`, the service's URL and key, the age identity `root/age/keys.txt` unless
 * `ageKeyFile` says otherwise, and `extra`.
 */
export function offlineTerraformEnv({ root, providerBin, service, ageKeyFile = path.join(root, 'age', 'keys.txt'), extra = {} }) {
  const mirror = path.join(root, 'mirror');
  const launcher = path.join(mirror, 'registry.terraform.io', 'kms-sync', 'kms', PROVIDER_VERSION, 'linux_amd64', `terraform-provider-kms_v${PROVIDER_VERSION}`);
  mkdirSync(path.dirname(launcher), { recursive: true });
  writeFileSync(launcher, `#!/bin/sh\nexec "${process.execPath}" "${providerBin}" "$@"\n`);
  chmodSync(launcher, 0o755);
  const cliConfig = path.join(root, 'terraform.rc');
  writeFileSync(cliConfig, `provider_installation {\n  filesystem_mirror {\n    path = "${mirror}"\n  }\n}\n`);
  return {
    PATH: process.env.PATH, HOME: root, TF_CLI_CONFIG_FILE: cliConfig, TF_IN_AUTOMATION: '1', CHECKPOINT_DISABLE: '1',
    KMS_API_URL: service.url, KMS_API_KEY: service.apiKey, SOPS_AGE_KEY_FILE: ageKeyFile, ...extra,
  };
}

/** The `terraform { required_providers }` block that names the provider (HCL, no final line break). */
export const HCL_REQUIRED_PROVIDER = `terraform {
  required_providers {
    kms = { source = "kms-sync/kms", version = "${PROVIDER_VERSION}" }
  }
}`;

/** A `kms_project "p"` and its `kms_environment "e"` (HCL, no final line break), as most test configurations begin. */
export function hclProjectEnvironment({ slug, name, type, url }) {
  return `resource "kms_project" "p" {
  slug = "${slug}"
  name = "${name}"
}
resource "kms_environment" "e" {
  project = kms_project.p.slug
  type    = "${type}"
  url     = "${url}"
}`;
}
