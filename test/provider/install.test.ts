// `kms-sync provider install` as a user runs it, with HOME (and TF_CLI_CONFIG_FILE) in a temporary
// folder: the real terraform then installs the provider from where it put it (init, apply, an
// empty re-plan against the emulator); a second run changes nothing; --print writes nothing; an
// existing ~/.terraformrc keeps its other settings (and gets a backup); a provider_installation
// block of the user's is refused, not edited; --dev writes dev_overrides. Without terraform on
// PATH the terraform parts skip and say so; the file parts still run.
import { execFile } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, afterEach, beforeEach, describe, expect, it } from 'vitest';
import { startEmulator, type RunningEmulator } from '../../src/emulator/index.js';
import { createHash } from 'node:crypto';
import { BEGIN_MARKER, END_MARKER, InstallError, planInstall, withBlock } from '../../src/provider/install.js';
import {
  executableName,
  NOTICES_NAME,
  releaseZipName,
  sumsName,
  terraformPlatform,
  writeZip,
} from '../../src/provider/release.js';
import { RAW_KEY_PATTERN, repoRoot, runCli, workspace, type CliResult } from '../support/cli.js';
import { NO_TERRAFORM, terraformOrSkip, type Run } from './terraform-support.js';
import { skipWhen } from '../support/skip.js';
import { patient } from '../support/patience.js';

const TERRAFORM = terraformOrSkip();
const API_KEY = 'sk_test_install0123456789';
const SOURCES = '["registry.terraform.io/kms-sync/kms", "registry.opentofu.org/kms-sync/kms"]';

let emu: RunningEmulator;
const roots: string[] = [];
const outputs: string[] = [];

/** A fresh HOME; `tfrc` set: TF_CLI_CONFIG_FILE points there (else Terraform reads ~/.terraformrc). */
function home(tfrc?: string): { home: string; env: NodeJS.ProcessEnv } {
  const h = workspace();
  roots.push(h);
  return {
    home: h,
    env: { HOME: h, NODE_DISABLE_COMPILE_CACHE: '1', ...(tfrc ? { TF_CLI_CONFIG_FILE: path.join(h, tfrc) } : {}) },
  };
}

async function install(env: NodeJS.ProcessEnv, ...args: string[]): Promise<CliResult> {
  const r = await runCli(['provider', 'install', ...args], { env });
  outputs.push(r.stdout, r.stderr);
  return r;
}

function terraform(cwd: string, env: NodeJS.ProcessEnv, ...args: string[]): Promise<Run> {
  return new Promise((resolve) => {
    execFile(
      TERRAFORM!,
      args,
      {
        cwd,
        maxBuffer: 64 * 1024 * 1024,
        env: {
          PATH: process.env.PATH,
          TF_IN_AUTOMATION: '1',
          CHECKPOINT_DISABLE: '1',
          KMS_API_URL: emu.url,
          KMS_API_KEY: API_KEY,
          SOPS_AGE_KEY_FILE: path.join(env.HOME!, 'age.txt'),
          ...env,
        },
      },
      (e, stdout, stderr) => {
        outputs.push(stdout, stderr);
        resolve({ code: e ? Number((e as { code?: number }).code ?? 1) : 0, stdout, stderr });
      },
    );
  });
}

const ok = (r: { code: number; stdout: string; stderr: string }, what: string) =>
  expect(r.code, `${what}:\n${r.stdout}\n${r.stderr}`).toBe(0);

/** Every file under dir with its content (the compile cache of runs aside). */
function tree(dir: string): Record<string, string> {
  const out: Record<string, string> = {};
  const walk = (d: string) => {
    for (const e of readdirSync(d, { withFileTypes: true })) {
      const p = path.join(d, e.name);
      if (e.isDirectory()) walk(p);
      else out[path.relative(dir, p)] = readFileSync(p, 'utf8');
    }
  };
  walk(dir);
  return out;
}

/** examples/terraform in a new folder of `root`. */
function example(root: string, name = 'project'): string {
  const dir = path.join(root, name);
  mkdirSync(dir);
  cpSync(path.join(repoRoot, 'examples', 'terraform', 'main.tf'), path.join(dir, 'main.tf'));
  return dir;
}

// A service of its own per test: each applies the same example, which its first owner then keeps.
beforeEach(async () => {
  emu = await startEmulator({ port: 0, apiKeys: [API_KEY] });
});

afterEach(async () => {
  await emu?.close();
});

afterAll(() => {
  for (const r of roots) rmSync(r, { recursive: true, force: true });
  for (const o of outputs) expect(o).not.toMatch(RAW_KEY_PATTERN);
});

describe('kms-sync provider install (files)', () => {
  it('--print shows the launcher and the CLI block and writes nothing', async () => {
    const { home: h, env } = home();
    writeFileSync(path.join(h, '.terraformrc'), 'disable_checkpoint = true\n');
    const before = tree(h);
    const r = await install(env, '--print');
    ok(r, 'install --print');
    expect(r.stdout).toContain('nothing is written (--print)');
    expect(r.stdout).toContain(
      `would write ${path.join(h, '.terraform.d', 'plugins', 'registry.terraform.io', 'kms-sync', 'kms', '0.1.0', 'linux_amd64', 'terraform-provider-kms_v0.1.0')}`,
    );
    expect(r.stdout).toContain(`would update CLI configuration ${path.join(h, '.terraformrc')}`);
    expect(r.stdout).toContain(`exclude = ${SOURCES}`);
    expect(r.stdout).toMatch(/needs Node\.js >= 22\.19/);
    expect(tree(h)).toEqual(before);
  });

  it('keeps the other settings of ~/.terraformrc, backs it up, and a second run changes nothing', async () => {
    const { home: h, env } = home();
    const rc = path.join(h, '.terraformrc');
    const theirs =
      'disable_checkpoint = true\nplugin_cache_dir = "/var/cache/tf"\n\nhost "example.com" {\n  services = { "modules.v1" = "https://example.com/modules/" }\n}\n';
    writeFileSync(rc, theirs);
    const first = await install(env);
    ok(first, 'install');
    const text = readFileSync(rc, 'utf8');
    expect(text.startsWith(theirs)).toBe(true);
    expect(text).toContain(`${BEGIN_MARKER}\nprovider_installation {`);
    expect(text).toContain(`path = "${path.join(h, '.terraform.d', 'plugins')}"`);
    expect(readFileSync(`${rc}.kms-sync.bak`, 'utf8')).toBe(theirs);
    const launcher = path.join(
      h,
      '.terraform.d',
      'plugins',
      'registry.terraform.io',
      'kms-sync',
      'kms',
      '0.1.0',
      'linux_amd64',
      'terraform-provider-kms_v0.1.0',
    );
    expect(statSync(launcher).mode & 0o777).toBe(0o755);
    expect(existsSync(launcher.replace('registry.terraform.io', 'registry.opentofu.org'))).toBe(true);

    const before = tree(h);
    const mtimes = [rc, launcher].map((f) => statSync(f).mtimeMs);
    const second = await install(env);
    ok(second, 'second install');
    expect(second.stdout).toContain('Already installed: nothing to do.');
    expect(second.stdout).toContain(`CLI configuration already up to date: ${rc}`);
    expect(tree(h)).toEqual(before);
    expect([rc, launcher].map((f) => statSync(f).mtimeMs)).toEqual(mtimes);
  });

  it('edits the file TF_CLI_CONFIG_FILE names, not ~/.terraformrc', async () => {
    const { home: h, env } = home('custom.tfrc');
    ok(await install(env, '--dir', path.join(h, 'mirror')), 'install');
    expect(readFileSync(path.join(h, 'custom.tfrc'), 'utf8')).toContain(`path = "${path.join(h, 'mirror')}"`);
    expect(existsSync(path.join(h, '.terraformrc'))).toBe(false);
    expect(existsSync(path.join(h, 'mirror', 'registry.terraform.io', 'kms-sync', 'kms', '0.1.0', 'linux_amd64'))).toBe(
      true,
    );
  });

  it("refuses a provider_installation block of the user's, shows what to add, and writes nothing", async () => {
    const { home: h, env } = home();
    const rc = path.join(h, '.terraformrc');
    const theirs = '# mine\nprovider_installation {\n  network_mirror {\n    url = "https://mirror.example/"\n  }\n}\n';
    writeFileSync(rc, theirs);
    const r = await install(env);
    expect(r.code).toBe(1);
    expect(r.stderr).toContain(`${rc} line 2 already has a provider_installation block`);
    expect(r.stderr).toContain(`exclude = ${SOURCES}`);
    expect(r.stderr).toContain('--no-cli-config');
    expect(readFileSync(rc, 'utf8')).toBe(theirs);
    expect(existsSync(path.join(h, '.terraform.d'))).toBe(false);
    // --no-cli-config installs the files and leaves the file alone.
    ok(await install(env, '--no-cli-config'), 'install --no-cli-config');
    expect(readFileSync(rc, 'utf8')).toBe(theirs);
    expect(
      existsSync(path.join(h, '.terraform.d', 'plugins', 'registry.terraform.io', 'kms-sync', 'kms', '0.1.0')),
    ).toBe(true);
  });

  it('--from: checks the release zip, puts it as it is in the packed layout, replaces the launcher, and keeps it on later runs', async () => {
    const { home: h, env } = home();
    const rel = path.join(h, 'release');
    mkdirSync(rel);
    const zipName = releaseZipName('0.1.0', 'linux_amd64');
    // As scripts/package-provider.js makes it: the executable, kms-sync's LICENSE and the notices.
    const zip = writeZip([
      { name: executableName('0.1.0', 'linux_amd64'), data: Buffer.from('#!/bin/sh\nexit 1\n'), mode: 0o755 },
      { name: 'LICENSE', data: Buffer.from('license\n'), mode: 0o644 },
      { name: NOTICES_NAME, data: Buffer.from('notices\n'), mode: 0o644 },
    ]);
    writeFileSync(path.join(rel, zipName), zip);
    writeFileSync(path.join(rel, sumsName('0.1.0')), `${'0'.repeat(64)}  ${zipName}\n`);
    const damaged = await install(env, '--from', rel);
    expect(damaged.code).toBe(1);
    expect(damaged.stderr).toContain(`its SHA-256 does not match ${sumsName('0.1.0')}`);
    expect(existsSync(path.join(h, '.terraform.d'))).toBe(false);
    expect(existsSync(path.join(h, '.terraformrc'))).toBe(false);

    writeFileSync(path.join(rel, sumsName('0.1.0')), `${createHash('sha256').update(zip).digest('hex')}  ${zipName}\n`);
    ok(await install(env), 'install the launcher first');
    const r = await install(env, '--from', rel);
    ok(r, 'install --from');
    expect(r.stdout).toContain('(packaged executable)');
    expect(r.stdout).toMatch(
      /removed .*0\.1\.0\/linux_amd64\/terraform-provider-kms_v0\.1\.0 \(replaced by the packaged executable\)/,
    );
    expect(r.stdout).toContain('delete the kms-sync/kms entry of .terraform.lock.hcl');
    expect(r.stdout).not.toMatch(/needs Node\.js/);
    const kms = path.join(h, '.terraform.d', 'plugins', 'registry.terraform.io', 'kms-sync', 'kms');
    expect(readFileSync(path.join(kms, zipName)).equals(zip)).toBe(true);
    expect(existsSync(path.join(kms, '0.1.0'))).toBe(false);
    const again = await install(env);
    ok(again, 'install without --from');
    expect(again.stdout).toContain('Already installed: nothing to do.');
    expect(again.stdout).toContain('(packaged executable)');

    const wrong = path.join(h, 'wrong', zipName);
    mkdirSync(path.dirname(wrong));
    writeFileSync(wrong, writeZip([{ name: 'terraform-provider-other', data: Buffer.from('x'), mode: 0o755 }]));
    const bad = await install(env, '--from', wrong, '--insecure-skip-checksum');
    expect(bad.code).toBe(1);
    expect(bad.stderr).toContain(
      `expected terraform-provider-kms_v0.1.0 in the zip, with at most LICENSE and ${NOTICES_NAME} beside it; found terraform-provider-other`,
    );
    // Beside the executable, only the two texts, and only as plain files: Terraform unpacks every entry.
    const exe = { name: executableName('0.1.0', 'linux_amd64'), data: Buffer.from('x'), mode: 0o755 };
    writeFileSync(
      wrong,
      writeZip([exe, { name: 'terraform-provider-kms_v0.1.0.sh', data: Buffer.from('x'), mode: 0o755 }]),
    );
    const extra = await install(env, '--from', wrong, '--insecure-skip-checksum');
    expect(extra.code).toBe(1);
    expect(extra.stderr).toContain('found terraform-provider-kms_v0.1.0, terraform-provider-kms_v0.1.0.sh');
    writeFileSync(wrong, writeZip([exe, { name: NOTICES_NAME, data: Buffer.from('x'), mode: 0o755 }]));
    const runnable = await install(env, '--from', wrong, '--insecure-skip-checksum');
    expect(runnable.code).toBe(1);
    expect(runnable.stderr).toContain(
      `${NOTICES_NAME} in the zip is not a regular file of mode 0644 or narrower (mode 0755)`,
    );
    expect(readFileSync(path.join(kms, zipName)).equals(zip)).toBe(true);
  });

  it('names platforms as Terraform does; on Windows, where a launcher script cannot run, asks for --from', () => {
    expect([
      terraformPlatform('linux', 'x64'),
      terraformPlatform('darwin', 'arm64'),
      terraformPlatform('win32', 'x64'),
      terraformPlatform('aix', 'ppc64'),
    ]).toEqual(['linux_amd64', 'darwin_arm64', 'windows_amd64', undefined]);
    const h = workspace();
    roots.push(h);
    const options = {
      version: '0.1.0',
      env: { APPDATA: path.join(h, 'AppData') },
      home: h,
      platform: 'win32',
      arch: 'x64',
      cliConfig: true,
      dev: false,
      node: 'node.exe',
      providerScript: 'bin.js',
    };
    expect(() => planInstall(options)).toThrow(
      /no packaged provider for windows_amd64 here, and on Windows Terraform cannot run a launcher script: pass --from/,
    );
    expect(() => planInstall({ ...options, dev: true })).toThrow(InstallError);
  });

  it('replaces only the lines between its markers, and refuses a marker without its partner', () => {
    const block = 'provider_installation {\n  direct {}\n}';
    const once = withBlock('rc', 'a = 1\n', block);
    const edited = once.replace('direct {}', 'direct { exclude = ["x/y/z"] }') + 'b = 2\n';
    const again = withBlock('rc', edited, block);
    expect(again).toBe(`${once}b = 2\n`);
    expect(() => withBlock('rc', `a = 1\n${BEGIN_MARKER}\n`, block)).toThrow(
      /rc line 2: a kms-sync marker without its partner/,
    );
    expect(() => withBlock('rc', `${END_MARKER}\n`, block)).toThrow(InstallError);
    // A provider_installation inside another block is not the top-level one.
    expect(() => withBlock('rc', 'x {\n  provider_installation = 1\n}\n', block)).not.toThrow();
  });
});

describe.skipIf(skipWhen(!TERRAFORM, `test/provider/install.test.ts: ${NO_TERRAFORM}`))(
  'terraform installs the provider kms-sync provider install put in place',
  () => {
    it(
      'init, apply and an empty re-plan with ~/.terraformrc (no TF_CLI_CONFIG_FILE)',
      async () => {
        const { home: h, env } = home();
        ok(await install(env), 'install');
        const dir = example(h);
        ok(await terraform(dir, env, 'init', '-input=false', '-no-color'), 'init');
        expect(readFileSync(path.join(dir, '.terraform.lock.hcl'), 'utf8')).toMatch(
          /provider "registry\.terraform\.io\/kms-sync\/kms" \{\n\s+version\s+= "0\.1\.0"/,
        );
        ok(await terraform(dir, env, 'apply', '-input=false', '-no-color', '-auto-approve'), 'apply');
        const again = await terraform(dir, env, 'plan', '-input=false', '-no-color', '-detailed-exitcode');
        expect(again.code, `${again.stdout}\n${again.stderr}`).toBe(0);

        // Another provider kept in the implied mirror: without a CLI block Terraform takes it from there
        // alone; with the block, install excludes it from registry installation too, so init stays offline.
        const other = path.join(
          h,
          '.terraform.d',
          'plugins',
          'registry.terraform.io',
          'acme',
          'other',
          '1.0.0',
          'linux_amd64',
          'terraform-provider-other_v1.0.0',
        );
        mkdirSync(path.dirname(other), { recursive: true });
        writeFileSync(other, '#!/bin/sh\nexit 1\n', { mode: 0o755 });
        const rerun = await install(env);
        ok(rerun, 'install again');
        expect(rerun.stdout).toContain('The mirror also holds registry.terraform.io/acme/other');
        expect(readFileSync(path.join(h, '.terraformrc'), 'utf8')).toContain(
          `exclude = ${SOURCES.replace(/\]$/, ', "registry.terraform.io/acme/other"]')}`,
        );
        const otherDir = path.join(h, 'other');
        mkdirSync(otherDir);
        writeFileSync(
          path.join(otherDir, 'main.tf'),
          'terraform {\n  required_providers {\n    other = { source = "acme/other", version = "1.0.0" }\n  }\n}\n',
        );
        const init = await terraform(otherDir, env, 'init', '-input=false', '-no-color');
        expect(init.code, `${init.stdout}\n${init.stderr}`).toBe(0);
        expect(init.stdout).toMatch(/Installed acme\/other v1\.0\.0/);
      },
      patient(180_000),
    );

    it(
      'init from --dir through TF_CLI_CONFIG_FILE; --dev then runs plan without init; install switches back',
      async () => {
        const { home: h, env } = home('terraform.rc');
        ok(await install(env, '--dir', path.join(h, 'mirror')), 'install');
        const dir = example(h);
        ok(await terraform(dir, env, 'init', '-input=false', '-no-color'), 'init');

        const dev = await install(env, '--dev');
        ok(dev, 'install --dev');
        const rc = readFileSync(path.join(h, 'terraform.rc'), 'utf8');
        expect(rc).toContain('dev_overrides {');
        expect(rc).not.toContain('filesystem_mirror');
        const devDir = example(h, 'dev');
        const plan = await terraform(devDir, env, 'plan', '-input=false', '-no-color');
        ok(plan, 'plan with dev_overrides');
        expect(plan.stderr + plan.stdout).toMatch(/Provider development overrides are in effect/);
        expect(plan.stdout).toMatch(/Plan: 6 to add/);

        ok(await install(env, '--dir', path.join(h, 'mirror')), 'install again');
        expect(readFileSync(path.join(h, 'terraform.rc'), 'utf8')).not.toContain('dev_overrides');
      },
      patient(180_000),
    );
  },
);
