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

/** The path of `bin` on PATH, or undefined. */
export function onPath(bin) {
  try {
    return execFileSync('sh', ['-c', `command -v ${bin}`], { encoding: 'utf8' }).trim() || undefined;
  } catch {
    return undefined; // not there
  }
}

/** The terraform (or tofu) binary on PATH, or undefined. */
export function findTerraform() {
  return onPath('terraform') ?? onPath('tofu');
}

/**
 * A provider served by Node from a script, in a filesystem mirror under both registries' names
 * (OpenTofu reads `<ns>/<type>` as registry.opentofu.org's, Terraform as registry.terraform.io's).
 */
export function mirrorProvider(mirror, p, script) {
  for (const host of ['registry.terraform.io', 'registry.opentofu.org']) {
    const launcher = path.join(
      mirror,
      host,
      p.namespace,
      p.type,
      p.version,
      'linux_amd64',
      `terraform-provider-${p.type}_v${p.version}`,
    );
    mkdirSync(path.dirname(launcher), { recursive: true });
    writeFileSync(launcher, `#!/bin/sh\nexec "${process.execPath}" "${script}" "$@"\n`);
    chmodSync(launcher, 0o755);
  }
}

/**
 * Puts a launcher of `providerBin` (run with this Node.js) into a filesystem mirror under `root`,
 * writes the CLI configuration that installs from it, and returns the environment terraform runs
 * with: HOME is `root`, the service's URL and key, the age identity `root/age/keys.txt` unless
 * `ageKeyFile` says otherwise, and `extra`.
 */
export function offlineTerraformEnv({
  root,
  providerBin,
  service,
  ageKeyFile = path.join(root, 'age', 'keys.txt'),
  extra = {},
}) {
  const mirror = path.join(root, 'mirror');
  mirrorProvider(mirror, { namespace: 'kms-sync', type: 'kms', version: PROVIDER_VERSION }, providerBin);
  const cliConfig = path.join(root, 'terraform.rc');
  writeFileSync(cliConfig, `provider_installation {\n  filesystem_mirror {\n    path = "${mirror}"\n  }\n}\n`);
  return {
    PATH: process.env.PATH,
    HOME: root,
    TF_CLI_CONFIG_FILE: cliConfig,
    TF_IN_AUTOMATION: '1',
    CHECKPOINT_DISABLE: '1',
    KMS_API_URL: service.url,
    KMS_API_KEY: service.apiKey,
    SOPS_AGE_KEY_FILE: ageKeyFile,
    ...extra,
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
