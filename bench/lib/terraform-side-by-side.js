// The Terraform provider next to Terraform's own built-in resource (issue 41): `terraform plan` of
// N kms_client resources (the provider as `kms-sync provider install` installs it: a launcher that
// runs dist/provider-bin/terraform-provider-kms.js, the bundled provider, with Node.js) and `terraform plan` of N terraform_data resources, each
// on a state made by an untimed apply, timed from spawn to exit. Terraform starts the provider
// several times per command, so its start-up and its per-resource RPC cost both show here.
import { spawn } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import {
  findTerraform,
  HCL_REQUIRED_PROVIDER,
  hclProjectEnvironment,
  offlineTerraformEnv,
} from '../../test/support/terraform-offline.js';

export { findTerraform };

/**
 * Two working directories under `dir`, initialised and applied: `kms` (N kms_client of one
 * environment of project `slug`) and `data` (N terraform_data; not with `withData: false`).
 * Returns the timed plan of each.
 */
export async function terraformSideBySide({
  bin,
  dir,
  providerBin,
  service,
  clients,
  owner,
  slug = 'tfbench',
  withData = true,
}) {
  const env = offlineTerraformEnv({ root: dir, providerBin, service });
  const run = (cwd, args, extraEnv = {}) =>
    new Promise((resolve, reject) => {
      const t0 = performance.now();
      const child = spawn(bin, [...args, '-input=false', '-no-color'], {
        cwd,
        env: { ...env, ...extraEnv },
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      let out = '';
      child.stdout.on('data', (d) => {
        out += d;
      });
      child.stderr.on('data', (d) => {
        out += d;
      });
      child.on('exit', (code) => {
        const wallMs = performance.now() - t0;
        if (code !== 0) reject(new Error(`terraform ${args.join(' ')} exited ${code}: ${out.slice(-600)}`));
        else resolve({ wallMs, out });
      });
    });
  const kms = path.join(dir, 'kms');
  const data = path.join(dir, 'data');
  mkdirSync(kms);
  mkdirSync(data);
  const resources = [];
  for (let i = 0; i < clients; i++) {
    resources.push(
      `resource "kms_client" "c${i}" {\n  project_env = kms_environment.e.project_env\n  name        = "c${i}"\n  template    = kms_template.t.name\n}\n`,
    );
  }
  writeFileSync(
    path.join(kms, 'main.tf'),
    `${HCL_REQUIRED_PROVIDER}
provider "kms" {
  owner = "${owner}"
}
${hclProjectEnvironment({ slug, name: 'TF bench', type: 'production', url: `https://${slug}.example` })}
resource "kms_template" "t" {
  project_env    = kms_environment.e.project_env
  name           = "std"
  rate_limit_day = 1000
  max_clients    = ${clients + 1}
}
${resources.join('')}`,
  );
  const data3 = [];
  for (let i = 0; i < 3 + clients; i++) data3.push(`resource "terraform_data" "r${i}" {\n  input = "r${i}"\n}\n`);
  writeFileSync(path.join(data, 'main.tf'), data3.join(''));
  for (const cwd of withData ? [kms, data] : [kms]) {
    await run(cwd, ['init']);
    await run(cwd, ['apply', '-auto-approve', '-parallelism=10']);
  }
  return {
    /** `extraEnv`: e.g. NODE_OPTIONS to profile the provider processes. */
    planKms: (extraEnv) => run(kms, ['plan', '-detailed-exitcode'], extraEnv),
    planData: (extraEnv) => run(data, ['plan', '-detailed-exitcode'], extraEnv),
  };
}
