// The Terraform provider next to Terraform's own built-in resource (issue 41): `terraform plan` of
// N kms_client resources (the provider as `kms-sync provider install` installs it: a launcher that
// runs dist/provider-bin/terraform-provider-kms.js, the bundled provider, with Node.js) and `terraform plan` of N terraform_data resources, each
// on a state made by an untimed apply, timed from spawn to exit, with the CPU of Terraform and of its provider processes. Terraform starts the provider
// several times per command, so its start-up and its per-resource RPC cost both show here.
import { spawn } from 'node:child_process';
import { mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import {
  findTerraform,
  HCL_REQUIRED_PROVIDER,
  hclProjectEnvironment,
  offlineTerraformEnv,
} from '../../test/support/terraform-offline.js';

export { findTerraform };

const CPU_AT_EXIT = path.join(path.dirname(fileURLToPath(import.meta.url)), 'cpu-at-exit.js');

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
  let plans = 0;
  // Timed from spawn to exit. CPU: the shell's `times` after Terraform exits gives its children's
  // user + system time (Terraform and the provider processes it waited for); each provider process
  // writes its own at exit (cpu-at-exit.js), so Terraform's own is the difference.
  const run = (cwd, args, extraEnv = {}) =>
    new Promise((resolve, reject) => {
      const cpuLog = path.join(dir, `provider-cpu-${plans++}.log`);
      writeFileSync(cpuLog, '');
      const nodeOptions = [extraEnv.NODE_OPTIONS, `--import ${pathToFileURL(CPU_AT_EXIT).href}`].filter(Boolean);
      const t0 = performance.now();
      const child = spawn(
        'sh',
        ['-c', '"$0" "$@"; rc=$?; times >&2; exit $rc', bin, ...args, '-input=false', '-no-color'],
        {
          cwd,
          env: { ...env, ...extraEnv, NODE_OPTIONS: nodeOptions.join(' '), KMS_BENCH_CPU_LOG: cpuLog },
          stdio: ['ignore', 'pipe', 'pipe'],
        },
      );
      let out = '';
      child.stdout.on('data', (d) => {
        out += d;
      });
      child.stderr.on('data', (d) => {
        out += d;
      });
      child.on('exit', (code) => {
        const wallMs = performance.now() - t0;
        // `times`: the shell's own user and system time, then its children's (the last pair).
        const pairs = [...out.matchAll(/(\d+)m([\d.]+)s\s+(\d+)m([\d.]+)s/g)];
        const last = pairs.at(-1);
        const cpuMs = last
          ? (Number(last[1]) * 60 + Number(last[2]) + Number(last[3]) * 60 + Number(last[4])) * 1000
          : 0;
        const providerCpuMs = readFileSync(cpuLog, 'utf8')
          .split('\n')
          .filter(Boolean)
          .reduce((sum, ms) => sum + Number(ms), 0);
        rmSync(cpuLog, { force: true });
        if (code !== 0) reject(new Error(`terraform ${args.join(' ')} exited ${code}: ${out.slice(-600)}`));
        else resolve({ wallMs, cpuMs, providerCpuMs, out });
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
