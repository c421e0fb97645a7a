// Issue 35 items 4 and 5: `kms-sync provider install` on a shared machine. Terraform runs the
// installed provider with the user's KMS_API_KEY, so another local user who can swap it runs code
// as them. Mounted against the built CLI: under umask 000 every folder is still 0755; a name
// planted where the old code wrote its predictable temp file (`<launcher>.kms-sync-<pid>.tmp`, the
// pid known because the shell execs the CLI) is not written through; a mirror folder that another
// user owns or may write, or that is a link into another user's folder, is refused before
// anything is written. `--from`: a zip without SHA256SUMS is refused (unless
// --insecure-skip-checksum), an entry that is a link, 0777 or setuid is refused, and the
// SHA256SUMS signature (ssh-keygen -Y sign, checked without ssh-keygen) is verified against the
// trusted key. Ownership checks need root (chown to nobody); they skip loudly otherwise.
import { execFile, execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import {
  chmodSync,
  chownSync,
  existsSync,
  lstatSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { SIGNATURE_SUFFIX } from '../../src/provider/install.js';
import { RELEASE_SIGNATURE_NAMESPACE } from '../../src/provider/release-signature.js';
import { executableName, releaseZipName, sumsName, writeZip } from '../../src/provider/release.js';
import { cliPath, runCli, workspace, type CliResult } from '../support/cli.js';
import { skipWhen } from '../support/skip.js';

const VERSION = (
  JSON.parse(readFileSync(path.join(path.dirname(cliPath), '..', '..', 'package.json'), 'utf8')) as { version: string }
).version;
const PLATFORM = 'linux_amd64';
const NOT_ROOT = process.getuid?.() !== 0;
const NOBODY = 65534;
const HAS_SSH_KEYGEN = (() => {
  try {
    execFileSync('sh', ['-c', 'command -v ssh-keygen'], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
})();
const onLinuxX64 = process.platform === 'linux' && process.arch === 'x64';

/** A HOME of its own, with TF_CLI_CONFIG_FILE inside it (never the machine's). */
function home(): { home: string; env: NodeJS.ProcessEnv; mirror: string } {
  const h = workspace();
  return {
    home: h,
    env: { HOME: h, NODE_DISABLE_COMPILE_CACHE: '1', TF_CLI_CONFIG_FILE: path.join(h, '.terraformrc') },
    mirror: path.join(h, '.terraform.d', 'plugins'),
  };
}

/** Runs the CLI from `sh` under umask 000, after `before` (shell code; $$ is the CLI's pid: exec keeps it). */
function installUnderUmask000(env: NodeJS.ProcessEnv, args: string[], before = ''): Promise<CliResult> {
  return new Promise((resolve) => {
    execFile(
      'sh',
      ['-c', `umask 000; ${before}\nexec "$NODE" "$CLI" provider install "$@"`, 'sh', ...args],
      {
        env: {
          PATH: process.env.PATH,
          TMPDIR: process.env.TMPDIR,
          NO_COLOR: '1',
          NODE: process.execPath,
          CLI: cliPath,
          ...env,
        },
      },
      (e, stdout, stderr) => resolve({ code: e ? Number((e as { code?: number }).code ?? 1) : 0, stdout, stderr }),
    );
  });
}

const mode = (p: string) => (lstatSync(p).mode & 0o7777).toString(8);

function folders(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true, recursive: true })
    .filter((e) => e.isDirectory())
    .map((e) => path.join(e.parentPath, e.name));
}

const launcherIn = (mirror: string) =>
  path.join(mirror, 'registry.terraform.io', 'kms-sync', 'kms', VERSION, PLATFORM, executableName(VERSION, PLATFORM));

describe('provider install: another local user cannot swap the provider', () => {
  it.skipIf(skipWhen(!onLinuxX64, 'install-safety: the launcher tests run on linux x64 only'))(
    'makes every folder 0755 and the launcher 0755 under umask 000, and the CLI configuration 0644',
    async () => {
      const { env, mirror, home: h } = home();
      const r = await installUnderUmask000(env, []);
      expect(r.code, r.stderr).toBe(0);
      const made = [path.join(h, '.terraform.d'), mirror, ...folders(mirror)];
      expect(made.length).toBeGreaterThan(8);
      for (const d of made) expect(`${d} ${mode(d)}`).toBe(`${d} 755`);
      expect(mode(launcherIn(mirror))).toBe('755');
      expect(mode(path.join(h, '.terraformrc'))).toBe('644');
      // No temp file left beside what was written.
      expect(readdirSync(h, { recursive: true }).filter((n) => String(n).endsWith('.tmp'))).toEqual([]);
    },
  );

  it.skipIf(skipWhen(!onLinuxX64, 'install-safety: the launcher tests run on linux x64 only'))(
    'never writes through a name planted where a predictable temp file would go',
    async () => {
      const { env, mirror, home: h } = home();
      const launcher = launcherIn(mirror);
      const victim = path.join(h, 'victim');
      writeFileSync(victim, 'untouched\n');
      // The folder exists (an earlier install), and a link waits at <launcher>.kms-sync-<pid>.tmp.
      const planted = `mkdir -p "${path.dirname(launcher)}"; chmod 755 "${h}/.terraform.d" "${h}/.terraform.d/plugins"; find "${h}/.terraform.d" -type d -exec chmod 755 {} +; ln -s "${victim}" "${launcher}.kms-sync-$$.tmp"`;
      const r = await installUnderUmask000(env, ['--no-cli-config'], planted);
      expect(r.code, r.stderr).toBe(0);
      expect(readFileSync(victim, 'utf8')).toBe('untouched\n');
      expect(lstatSync(launcher).isFile()).toBe(true);
      expect(readFileSync(launcher, 'utf8')).toContain('Written by kms-sync provider install');
    },
  );

  it.skipIf(skipWhen(NOT_ROOT, 'install-safety: folders of another user need root (chown to nobody)'))(
    'refuses a mirror that another user owns, and writes nothing',
    async () => {
      const { env, home: h } = home();
      const theirs = path.join(h, 'shared-mirror');
      mkdirSync(theirs, { mode: 0o755 });
      chownSync(theirs, NOBODY, NOBODY);
      const r = await installUnderUmask000(env, ['--dir', theirs]);
      expect(r.code).toBe(1);
      expect(r.stderr).toContain(`refusing to install: ${theirs} is owned by another user (uid ${NOBODY})`);
      expect(readdirSync(theirs)).toEqual([]);
      expect(existsSync(path.join(h, '.terraformrc'))).toBe(false);
    },
  );

  it('refuses a mirror folder others may write (left 0777 by an earlier install under umask 000), and a parent others may write', async () => {
    const { env, mirror, home: h } = home();
    mkdirSync(path.join(mirror, 'registry.terraform.io', 'kms-sync'), { recursive: true });
    chmodSync(path.join(mirror, 'registry.terraform.io'), 0o777);
    const r = await installUnderUmask000(env, []);
    expect(r.code).toBe(1);
    expect(r.stderr).toContain(`${path.join(mirror, 'registry.terraform.io')} is writable by other users (mode 0777)`);
    expect(existsSync(path.join(mirror, 'registry.terraform.io', 'kms-sync', 'kms'))).toBe(false);
    expect(existsSync(path.join(h, '.terraformrc'))).toBe(false);

    const open = path.join(h, 'open');
    mkdirSync(open);
    chmodSync(open, 0o777); // not sticky: anyone may rename the mirror away and put theirs
    const below = await installUnderUmask000(env, ['--dir', path.join(open, 'mirror'), '--no-cli-config']);
    expect(below.code).toBe(1);
    expect(below.stderr).toContain(`${open} is writable by other users (mode 0777)`);
    expect(existsSync(path.join(open, 'mirror'))).toBe(false);
  });

  it.skipIf(skipWhen(NOT_ROOT, 'install-safety: folders of another user need root (chown to nobody)'))(
    "refuses a mirror folder swapped for a link into another user's folder",
    async () => {
      const { env, mirror, home: h } = home();
      const theirs = path.join(h, 'theirs');
      mkdirSync(path.join(theirs, 'kms-sync'), { recursive: true, mode: 0o755 });
      chownSync(theirs, NOBODY, NOBODY);
      chownSync(path.join(theirs, 'kms-sync'), NOBODY, NOBODY);
      mkdirSync(mirror, { recursive: true });
      symlinkSync(theirs, path.join(mirror, 'registry.terraform.io'));
      const r = await installUnderUmask000(env, []);
      expect(r.code).toBe(1);
      expect(r.stderr).toContain(`is owned by another user (uid ${NOBODY})`);
      expect(readdirSync(path.join(theirs, 'kms-sync'))).toEqual([]);
    },
  );
});

/** A release folder with this platform's zip (entries as given) and, unless `sums` is false, its SHA256SUMS. */
function release(dir: string, zip: Buffer, sums = true): string {
  const rel = path.join(dir, 'release');
  mkdirSync(rel, { recursive: true });
  const name = releaseZipName(VERSION, PLATFORM);
  writeFileSync(path.join(rel, name), zip);
  if (sums)
    writeFileSync(path.join(rel, sumsName(VERSION)), `${createHash('sha256').update(zip).digest('hex')}  ${name}\n`);
  return rel;
}

const goodZip = () =>
  writeZip([{ name: executableName(VERSION, PLATFORM), data: Buffer.from('#!/bin/sh\nexit 1\n'), mode: 0o755 }]);

/** The zip with its one entry's Unix attributes (file type and mode) set to `attributes`. */
function withAttributes(zip: Buffer, attributes: number): Buffer {
  const out = Buffer.from(zip);
  const at = out.indexOf(Buffer.from([0x50, 0x4b, 0x01, 0x02]));
  out.writeUInt32LE((attributes << 16) >>> 0, at + 38);
  return out;
}

describe('provider install --from: only a checked release', () => {
  it('refuses a zip without SHA256SUMS unless --insecure-skip-checksum says so', async () => {
    const { env, mirror, home: h } = home();
    const rel = release(h, goodZip(), false);
    const r = await runCli(['provider', 'install', '--from', rel], { env });
    expect(r.code).toBe(1);
    expect(r.stderr).toContain(`no ${sumsName(VERSION)} beside it`);
    expect(existsSync(mirror)).toBe(false);
    const skipped = await runCli(['provider', 'install', '--from', rel, '--insecure-skip-checksum'], { env });
    expect(skipped.code, skipped.stderr).toBe(0);
    expect(skipped.stdout).toContain('Installed without checking a checksum (--insecure-skip-checksum)');
    const plain = await runCli(['provider', 'install', '--insecure-skip-checksum'], { env });
    expect(plain.code).toBe(1);
    expect(plain.stderr).toContain('--insecure-skip-checksum and --trusted-key go with --from');
  });

  it('refuses an entry that is a symbolic link, 0777 or setuid, even with a matching SHA256SUMS', async () => {
    for (const [attributes, why] of [
      [0o120755, 'a symbolic link, not a regular file'],
      [0o100777, 'has mode 0777, wider than 0755'],
      [0o104755, 'has mode 04755, wider than 0755'],
    ] as const) {
      const { env, mirror, home: h } = home();
      const rel = release(h, withAttributes(goodZip(), attributes));
      const r = await runCli(['provider', 'install', '--from', rel], { env });
      expect(r.code, why).toBe(1);
      expect(r.stderr).toContain(why);
      expect(existsSync(mirror)).toBe(false);
    }
  });

  it.skipIf(
    skipWhen(
      !HAS_SSH_KEYGEN,
      'install-safety: ssh-keygen is not installed, so no release signature can be made to check',
    ),
  )('checks the signature of SHA256SUMS (ssh-keygen -Y sign) against the trusted key', async () => {
    const { env, mirror, home: h } = home();
    const keygen = (...a: string[]) => execFileSync('ssh-keygen', a, { stdio: 'pipe' });
    keygen('-q', '-t', 'ed25519', '-N', '', '-C', 'releases@kms-sync', '-f', path.join(h, 'release-key'));
    keygen('-q', '-t', 'ed25519', '-N', '', '-f', path.join(h, 'other-key'));
    const rel = release(h, goodZip());
    const sums = path.join(rel, sumsName(VERSION));
    const sign = (key: string, namespace = RELEASE_SIGNATURE_NAMESPACE) => {
      rmSync(`${sums}.sig`, { force: true });
      keygen('-Y', 'sign', '-f', path.join(h, key), '-n', namespace, sums);
      writeFileSync(`${sums}${SIGNATURE_SUFFIX}`, readFileSync(`${sums}.sig`));
    };
    const trusted = ['--trusted-key', path.join(h, 'release-key.pub')];

    // Asked for (--trusted-key) but not published: refused.
    const unsigned = await runCli(['provider', 'install', '--from', rel, ...trusted], { env });
    expect(unsigned.code).toBe(1);
    expect(unsigned.stderr).toContain('is not signed');

    sign('release-key');
    const good = await runCli(['provider', 'install', '--from', rel, ...trusted, '--no-cli-config'], { env });
    expect(good.code, good.stderr).toBe(0);
    expect(good.stdout).toContain('is signed by a trusted release key (releases@kms-sync)');

    // Published, but this kms-sync ships no release key and none is given: refused, not ignored.
    const noKey = await runCli(['provider', 'install', '--from', rel, '--dir', path.join(h, 'm2')], { env });
    expect(noKey.code).toBe(1);
    expect(noKey.stderr).toContain('there is no trusted release key to check it with');

    // Another zip with its own SHA256SUMS, the old signature beside it: tampering is caught.
    const evil = writeZip([
      { name: executableName(VERSION, PLATFORM), data: Buffer.from('#!/bin/sh\ncurl evil\n'), mode: 0o755 },
    ]);
    writeFileSync(path.join(rel, releaseZipName(VERSION, PLATFORM)), evil);
    writeFileSync(sums, `${createHash('sha256').update(evil).digest('hex')}  ${releaseZipName(VERSION, PLATFORM)}\n`);
    const tampered = await runCli(['provider', 'install', '--from', rel, ...trusted, '--dir', path.join(h, 'm3')], {
      env,
    });
    expect(tampered.code).toBe(1);
    expect(tampered.stderr).toContain('the signature does not match the file');

    // Signed by a key that is not trusted, or for another namespace (a git commit signature): refused.
    sign('other-key');
    const stranger = await runCli(['provider', 'install', '--from', rel, ...trusted, '--dir', path.join(h, 'm4')], {
      env,
    });
    expect(stranger.code).toBe(1);
    expect(stranger.stderr).toContain('signed by a key that is not among the trusted release keys');
    sign('release-key', 'git');
    const wrongUse = await runCli(['provider', 'install', '--from', rel, ...trusted, '--dir', path.join(h, 'm5')], {
      env,
    });
    expect(wrongUse.code).toBe(1);
    expect(wrongUse.stderr).toContain(`signed for "git", not for ${RELEASE_SIGNATURE_NAMESPACE}`);
    for (const m of ['m2', 'm3', 'm4', 'm5']) expect(existsSync(path.join(h, m))).toBe(false);
    expect(statSync(mirror).isDirectory()).toBe(true);
  });
});
