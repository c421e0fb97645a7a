// Running the real terraform (or tofu) binary against the built provider, offline: the provider
// is served from a filesystem mirror (test/support/terraform-offline.js, which the bench shares),
// and nothing reaches a registry. Shared by the terraform and CDKTF end-to-end tests; both skip
// loudly when neither binary is on PATH.
import { execFile } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { decryptSops } from 'sops-age';
import { expect } from 'vitest';
import {
  findTerraform,
  mirrorProvider,
  offlineTerraformEnv,
  onPath,
  PROVIDER_VERSION,
} from '../support/terraform-offline.js';
import { PROVIDER_BIN } from './harness.js';

export { mirrorProvider, onPath, PROVIDER_VERSION };

/** The terraform (or tofu) binary on PATH, or undefined: `describe.skipIf(skipWhen(!bin, `${file}: ${NO_TERRAFORM}`))`. */
export function terraformOrSkip(): string | undefined {
  return findTerraform();
}

/** Why the terraform-driven tests skip. */
export const NO_TERRAFORM =
  'neither terraform nor tofu is on PATH; the protocol-level tests (lifecycle, plugin-server) still cover the provider';

export interface Run {
  code: number;
  stdout: string;
  stderr: string;
}

export interface OfflineTerraform {
  /** Environment every run gets: the mirror's CLI configuration, the service, the age identity. */
  env: NodeJS.ProcessEnv;
  /** Every stdout and stderr so far, for "no raw key was ever printed". */
  outputs: string[];
  run(cwd: string, args: string[], extraEnv?: NodeJS.ProcessEnv): Promise<Run>;
  /** A new working directory `name` under the root with these files, `terraform init`ed (fails the test if init does). */
  init(name: string, files: Record<string, string>): Promise<string>;
}

/** Fails the test, with terraform's output, unless the run exited 0. */
export const expectOk = (r: Run, what: string): void => expect(r.code, `${what}:\n${r.stdout}\n${r.stderr}`).toBe(0);

/**
 * Puts the provider into a filesystem mirror under `root` and returns a runner whose CLI
 * configuration installs it from there (HOME is `root`: no ~/.terraformrc of the machine).
 */
export function offlineTerraform(
  bin: string,
  root: string,
  service: { url: string; apiKey: string },
): OfflineTerraform {
  const env: NodeJS.ProcessEnv = offlineTerraformEnv({ root, providerBin: PROVIDER_BIN, service });
  const outputs: string[] = [];
  const run = (cwd: string, args: string[], extraEnv: NodeJS.ProcessEnv = {}) =>
    new Promise<Run>((resolve) => {
      execFile(bin, args, { cwd, env: { ...env, ...extraEnv }, maxBuffer: 64 * 1024 * 1024 }, (e, stdout, stderr) => {
        outputs.push(stdout, stderr);
        resolve({ code: e ? Number((e as { code?: number }).code ?? 1) : 0, stdout, stderr });
      });
    });
  return {
    env,
    outputs,
    run,
    init: async (name, files) => {
      const dir = path.join(root, name);
      mkdirSync(dir, { recursive: true });
      for (const [f, text] of Object.entries(files)) writeFileSync(path.join(dir, f), text);
      expectOk(await run(dir, ['init', '-input=false', '-no-color']), `terraform init in ${name}`);
      return dir;
    },
  };
}

/**
 * The secrets of a SOPS store file, decrypted with sops-age and the age identity (independently
 * of kms-sync's own store code): secret name → raw value.
 */
export async function decryptStore(storeFile: string, ageKeyFile: string): Promise<Record<string, string>> {
  const identity = readFileSync(ageKeyFile, 'utf8')
    .split('\n')
    .find((l) => l.startsWith('AGE-SECRET-KEY-1'));
  if (!identity) throw new Error(`${ageKeyFile}: no age identity`);
  const decoded = (await decryptSops(readFileSync(storeFile, 'utf8'), { secretKey: identity, fileType: 'yaml' })) as {
    secrets?: Record<string, { value: string }>;
  };
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
