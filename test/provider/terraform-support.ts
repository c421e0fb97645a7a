// Running the real terraform (or tofu) binary against the built provider, offline: the provider
// is served from a filesystem mirror (a wrapper script named as Terraform expects), the CLI
// configuration points at it, and nothing reaches a registry. Shared by the terraform and CDKTF
// end-to-end tests; both skip loudly when neither binary is on PATH.
import { execFile, execFileSync } from 'node:child_process';
import { chmodSync, existsSync, mkdirSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { decryptSops } from 'sops-age';
import { PROVIDER_BIN } from './harness.js';

export const PROVIDER_VERSION = '0.1.0';

/** The path of `bin` on PATH, or undefined. */
export function onPath(bin: 'terraform' | 'tofu'): string | undefined {
  try {
    return execFileSync('sh', ['-c', `command -v ${bin}`], { encoding: 'utf8' }).trim() || undefined;
  } catch {
    return undefined; // not there
  }
}

function findTerraform(): string | undefined {
  return onPath('terraform') ?? onPath('tofu');
}

/** The terraform (or tofu) binary on PATH, or undefined: `describe.skipIf(skipWhen(!bin, `${file}: ${NO_TERRAFORM}`))`. */
export function terraformOrSkip(): string | undefined {
  return findTerraform();
}

/** Why the terraform-driven tests skip. */
export const NO_TERRAFORM = 'neither terraform nor tofu is on PATH; the protocol-level tests (lifecycle, plugin-server) still cover the provider';

export interface Run { code: number; stdout: string; stderr: string }

export interface OfflineTerraform {
  /** Environment every run gets: the mirror's CLI configuration, the service, the age identity. */
  env: NodeJS.ProcessEnv;
  /** Every stdout and stderr so far, for "no raw key was ever printed". */
  outputs: string[];
  run(cwd: string, args: string[], extraEnv?: NodeJS.ProcessEnv): Promise<Run>;
}

/**
 * Puts the provider into a filesystem mirror under `root` and returns a runner whose CLI
 * configuration installs it from there (HOME is `root`: no ~/.terraformrc of the machine).
 */
export function offlineTerraform(bin: string, root: string, service: { url: string; apiKey: string }): OfflineTerraform {
  const mirror = path.join(root, 'mirror');
  mirrorProvider(mirror, { namespace: 'kms-sync', type: 'kms', version: PROVIDER_VERSION }, PROVIDER_BIN);
  const cliConfig = path.join(root, 'terraform.rc');
  writeFileSync(cliConfig, `provider_installation {\n  filesystem_mirror {\n    path = "${mirror}"\n  }\n}\n`);
  const env: NodeJS.ProcessEnv = {
    PATH: process.env.PATH, HOME: root, TF_CLI_CONFIG_FILE: cliConfig, TF_IN_AUTOMATION: '1', CHECKPOINT_DISABLE: '1',
    KMS_API_URL: service.url, KMS_API_KEY: service.apiKey, SOPS_AGE_KEY_FILE: path.join(root, 'age', 'keys.txt'),
  };
  const outputs: string[] = [];
  return {
    env,
    outputs,
    run: (cwd, args, extraEnv = {}) => new Promise((resolve) => {
      execFile(bin, args, { cwd, env: { ...env, ...extraEnv }, maxBuffer: 64 * 1024 * 1024 }, (e, stdout, stderr) => {
        outputs.push(stdout, stderr);
        resolve({ code: e ? Number((e as { code?: number }).code ?? 1) : 0, stdout, stderr });
      });
    }),
  };
}

/**
 * A provider served by Node from a script, in a filesystem mirror under both registries' names
 * (OpenTofu reads `<ns>/<type>` as registry.opentofu.org's, Terraform as registry.terraform.io's).
 */
export function mirrorProvider(mirror: string, p: { namespace: string; type: string; version: string }, script: string): void {
  for (const host of ['registry.terraform.io', 'registry.opentofu.org']) {
    const wrapper = path.join(mirror, host, p.namespace, p.type, p.version, 'linux_amd64', `terraform-provider-${p.type}_v${p.version}`);
    mkdirSync(path.dirname(wrapper), { recursive: true });
    writeFileSync(wrapper, `#!/bin/sh\nexec "${process.execPath}" "${script}" "$@"\n`);
    chmodSync(wrapper, 0o755);
  }
}

/**
 * The secrets of a SOPS store file, decrypted with sops-age and the age identity (independently
 * of kms-sync's own store code): secret name → raw value.
 */
export async function decryptStore(storeFile: string, ageKeyFile: string): Promise<Record<string, string>> {
  const identity = readFileSync(ageKeyFile, 'utf8').split('\n').find((l) => l.startsWith('AGE-SECRET-KEY-1'));
  if (!identity) throw new Error(`${ageKeyFile}: no age identity`);
  const decoded = (await decryptSops(readFileSync(storeFile, 'utf8'), { secretKey: identity, fileType: 'yaml' })) as { secrets?: Record<string, { value: string }> };
  return Object.fromEntries(Object.entries(decoded.secrets ?? {}).map(([name, s]) => [name, s.value]));
}

/** Every regular file under `dir` (symlinks not followed), for "no raw key anywhere in here". */
export function filesUnder(dir: string): string[] {
  if (!existsSync(dir)) return [];
  const out: string[] = [];
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const p = path.join(dir, entry.name);
    if (entry.isDirectory()) out.push(...filesUnder(p));
    else if (entry.isFile() && statSync(p).size < 64 * 1024 * 1024) out.push(p);
  }
  return out;
}
