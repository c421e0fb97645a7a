// Issue 34 (files and sizes) and issue 42, mounted against the built CLI: a pull request commits
// links to host files (a file-mounted secret, /proc/self/environ, /etc/passwd, a whole folder),
// a file whose text is a secret, or a huge file; `validate` and `plan` (text and Markdown, with a
// step summary) must refuse them without a byte of the host file or the secret in any output,
// and a 16 MB value must get the ordinary diagnostic with file:line, never a stack trace.
import { existsSync, mkdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { runCli, workspace } from '../support/cli.js';
import { patient } from '../support/patience.js';

const cleanup: string[] = [];
afterEach(() => {
  for (const d of cleanup.splice(0)) rmSync(d, { recursive: true, force: true });
});
const scratch = (files: Record<string, string> = {}) => {
  const dir = workspace(files);
  cleanup.push(dir);
  return dir;
};

const GOOD = `apiVersion: kms-sync/v1
projects:
  - slug: acme
    name: Acme
    environments:
      - type: production
        url: https://api.acme.example
`;

/** A secret no shape of redaction knows: only its own value can betray it. */
const MOUNTED_SECRET = 'db-password-7Hq2mZx9Lw4Kp1Vt';
/** A variable of the runner's environment that no credential rule names (what /proc/self/environ would show). */
const RUNNER_VAR = 'RUNNER_MARKER';
const RUNNER_VALUE = 'runner-env-value-3f9a1c77e2';
const ENGINE = /RangeError|TypeError|Maximum call stack|^\s+at .+:\d+:\d+\)?$/m;

/** plan with the configuration folder, text and Markdown (with a step summary): every output. */
async function everyOutput(dir: string, args: string[]): Promise<{ code: number; text: string }[]> {
  const summary = path.join(dir, '..', `${path.basename(dir)}-summary.md`);
  cleanup.push(summary);
  const env = {
    [RUNNER_VAR]: RUNNER_VALUE,
    KMS_API_URL: 'http://127.0.0.1:9/api/v1',
    KMS_API_KEY: 'sk_test_filesinsideroot0001',
    GITHUB_STEP_SUMMARY: summary,
  };
  const runs = [
    await runCli(['validate', ...args], { cwd: dir, env }),
    await runCli(['plan', ...args], { cwd: dir, env }),
    await runCli(['plan', '--format', 'markdown', ...args], { cwd: dir, env }),
  ];
  const md = existsSync(summary) ? readFileSync(summary, 'utf8') : '';
  return runs.map((r, i) => ({ code: r.code, text: `${r.stdout}\n${r.stderr}${i === 2 ? `\n${md}` : ''}` }));
}

describe('configuration files stay inside their folder (issue 34)', () => {
  it('links to a mounted secret, /proc/self/environ and /etc/passwd are refused, and none of their text is printed', async () => {
    const outside = scratch({ 'secret-mount/password': `${MOUNTED_SECRET}\n` });
    const dir = scratch({ 'config/project.yaml': GOOD });
    symlinkSync(path.join(outside, 'secret-mount', 'password'), path.join(dir, 'config', 'db.yaml'));
    symlinkSync('/proc/self/environ', path.join(dir, 'config', 'env.yaml'));
    symlinkSync('/etc/passwd', path.join(dir, 'config', 'users.yml'));
    for (const r of await everyOutput(dir, ['-f', 'config'])) {
      expect(r.code, r.text).toBe(1);
      expect(r.text).toMatch(/config\/db\.yaml: resolves outside config \(through a symbolic link\)/);
      expect(r.text).toMatch(/config\/env\.yaml: resolves outside config/);
      expect(r.text).toMatch(/config\/users\.yml: resolves outside config/);
      expect(r.text).not.toContain(MOUNTED_SECRET);
      expect(r.text).not.toContain(RUNNER_VALUE);
      expect(r.text).not.toContain('root:x:0');
      expect(r.text).not.toMatch(ENGINE);
    }
  });

  it('a file named with -f that links out of its folder, and a linked -f folder, are refused', async () => {
    const outside = scratch({ 'etc/kms.yaml': GOOD, 'etc/secret.yaml': `${MOUNTED_SECRET}\n` });
    const dir = scratch();
    symlinkSync(path.join(outside, 'etc', 'secret.yaml'), path.join(dir, 'kms-sync.yaml'));
    symlinkSync(path.join(outside, 'etc'), path.join(dir, 'config'));
    const named = await runCli(['validate', '-f', 'kms-sync.yaml'], { cwd: dir });
    expect(named.code).toBe(1);
    expect(named.stderr).toContain('kms-sync.yaml: resolves outside the working directory (through a symbolic link)');
    const folder = await runCli(['validate', '-f', 'config'], { cwd: dir });
    expect(folder.code).toBe(1);
    expect(folder.stderr).toContain('config: resolves outside the working directory (through a symbolic link)');
    for (const r of [named, folder]) expect(r.stdout + r.stderr).not.toContain(MOUNTED_SECRET);
    // What the operator names outside the working directory is theirs to name; a link that stays inside is followed.
    expect((await runCli(['validate', '-f', path.join(outside, 'etc', 'kms.yaml')], { cwd: dir })).code).toBe(0);
    const inside = scratch({ 'config/real/project.yaml': GOOD });
    symlinkSync(path.join(inside, 'config', 'real', 'project.yaml'), path.join(inside, 'config', 'alias.yaml'));
    const ok = await runCli(['validate', '-f', 'config/alias.yaml'], { cwd: inside });
    expect(ok.stderr).toBe('');
    expect(ok.code).toBe(0);
  });

  it('a committed file whose text is a secret (not YAML configuration) is reported without quoting it', async () => {
    const dir = scratch({
      'config/project.yaml': GOOD,
      'config/token.yaml': `${MOUNTED_SECRET}\n`,
      'config/env.yaml': `PATH=/bin\u0000${RUNNER_VAR}=${RUNNER_VALUE}\u0000`,
    });
    for (const r of await everyOutput(dir, ['-f', 'config'])) {
      expect(r.code, r.text).toBe(1);
      expect(r.text).toContain(
        'config/token.yaml:1:1: (top level): not a kms-sync configuration: its top level is plain text',
      );
      expect(r.text).toContain('config/env.yaml:1:1: (top level): not a kms-sync configuration');
      expect(r.text).not.toContain(MOUNTED_SECRET);
      expect(r.text).not.toContain(RUNNER_VALUE);
      expect(r.text).not.toContain('got "');
    }
  });
});

describe('the default ignore file stays inside its folder (issue 34)', () => {
  it('a committed .kmsignore that links to /etc/passwd is refused, its lines never quoted: beside the configuration, or in the current folder', async () => {
    const env = { KMS_API_URL: 'http://127.0.0.1:9/api/v1', KMS_API_KEY: 'sk_test_filesinsideroot0001' };
    // Beside the configuration (where it is read from), and in the current folder (still read when the configuration's folder has none).
    for (const where of [path.join('config', '.kmsignore'), '.kmsignore']) {
      const dir = scratch({ 'config/project.yaml': GOOD });
      symlinkSync('/etc/passwd', path.join(dir, where));
      for (const args of [
        ['plan', '-f', 'config'],
        ['drift', '-f', 'config'],
      ]) {
        const r = await runCli(args, { cwd: dir, env });
        expect(r.code, r.stderr).toBe(1);
        expect(r.stderr).toContain(`${where} resolves outside its folder (through a symbolic link)`);
        expect(r.stdout + r.stderr).not.toContain('root:x:0');
      }
    }
  });
});

describe('a synth output handed on from another job (--cdktf-out) is read inside its folder (issue 34)', () => {
  it('a stack path with .. and a linked manifest.json are refused; a parse error quotes nothing', async () => {
    const outside = scratch({ 'secret.json': `{"x": "${MOUNTED_SECRET}"}`, 'bad.json': `${MOUNTED_SECRET} not json` });
    const escaping = scratch({
      'cdktf.out/manifest.json': JSON.stringify({
        version: '0.21.0',
        stacks: { s: { name: 's', synthesizedStackPath: `../../${path.basename(outside)}/secret.json` } },
      }),
    });
    const linked = scratch({ 'cdktf.out/stacks/s/cdk.tf.json': '{}' });
    symlinkSync('/proc/self/environ', path.join(linked, 'cdktf.out', 'manifest.json'));
    const garbled = scratch({
      'cdktf.out/manifest.json': JSON.stringify({
        version: '0.21.0',
        stacks: { s: { name: 's', synthesizedStackPath: 'stacks/s/cdk.tf.json' } },
      }),
    });
    mkdirSync(path.join(garbled, 'cdktf.out', 'stacks', 's'), { recursive: true });
    writeFileSync(
      path.join(garbled, 'cdktf.out', 'stacks', 's', 'cdk.tf.json'),
      readFileSync(path.join(outside, 'bad.json')),
    );
    const env = { [RUNNER_VAR]: RUNNER_VALUE };
    const e = await runCli(['validate', '--cdktf-out', 'cdktf.out'], { cwd: escaping, env });
    expect(e.stderr).toContain('resolves outside the synth output folder');
    const l = await runCli(['validate', '--cdktf-out', 'cdktf.out'], { cwd: linked, env });
    expect(l.stderr).toContain('manifest.json: resolves outside the synth output folder');
    const g = await runCli(['validate', '--cdktf-out', 'cdktf.out'], { cwd: garbled, env });
    expect(g.stderr).toMatch(/cdk\.tf\.json: not valid JSON\s*(\(at character \d+\))?$/m);
    for (const r of [e, l, g]) {
      expect(r.code).toBe(1);
      expect(r.stdout + r.stderr).not.toContain(MOUNTED_SECRET.slice(0, 8));
      expect(r.stdout + r.stderr).not.toContain(RUNNER_VALUE.slice(0, 8));
    }
  });
});

describe('size limits of configuration files (issue 34)', () => {
  it('a file over the limit is refused before it is parsed, naming the file and the limit; the flag and the variable raise it', async () => {
    const big = `${GOOD}# ${'x'.repeat(6 * 1024 * 1024)}\n`;
    const dir = scratch({ 'config/project.yaml': big });
    const r = await runCli(['validate', '-f', 'config'], { cwd: dir });
    expect(r.code).toBe(1);
    expect(r.stderr).toContain(
      'config/project.yaml: the file is larger than the limit of 5 MB per configuration file (6 MB); raise it with --max-file-size or KMS_SYNC_MAX_FILE_SIZE',
    );
    expect((await runCli(['validate', '-f', 'config', '--max-file-size', '7MB'], { cwd: dir })).code).toBe(0);
    expect(
      (await runCli(['validate', '-f', 'config'], { cwd: dir, env: { KMS_SYNC_MAX_FILE_SIZE: '7MB' } })).code,
    ).toBe(0);
    const bad = await runCli(['validate', '-f', 'config', '--max-file-size', 'lots'], { cwd: dir });
    expect(bad.code).toBe(1);
    expect(bad.stderr).toContain('--max-file-size must be a size such as 5MB');
  });

  it('the files together are limited too', async () => {
    const part = (i: number) =>
      `${GOOD.replace('acme', `acme${i}`).replace('Acme', `Acme ${i}`).replace('api.acme', `api.acme${i}`)}# ${'y'.repeat(400 * 1024)}\n`;
    const dir = scratch(Object.fromEntries([0, 1, 2].map((i) => [`config/p${i}.yaml`, part(i)])));
    const r = await runCli(['validate', '-f', 'config', '--max-config-size', '1MB'], { cwd: dir });
    expect(r.code).toBe(1);
    expect(r.stderr).toContain(
      "config/p2.yaml: the configuration's files together are larger than the limit of 1 MB (--max-config-size or KMS_SYNC_MAX_CONFIG_SIZE); this file is not read",
    );
    expect((await runCli(['validate', '-f', 'config'], { cwd: dir })).code).toBe(0);
  });
});

describe('a 16 MB value (issue 42)', () => {
  it(
    'validate and plan report it at file:line, exit 1, no stack trace',
    async () => {
      const huge = 'v'.repeat(16 * 1024 * 1024);
      const dir = scratch({
        'config/project.yaml': `${GOOD}        clients:\n          - name: c1\n            template: "${huge}"\n`,
      });
      const args = ['-f', 'config', '--max-file-size', '32MB'];
      const env = { KMS_API_URL: 'http://127.0.0.1:9/api/v1', KMS_API_KEY: 'sk_test_filesinsideroot0001' };
      for (const cmd of ['validate', 'plan']) {
        const r = await runCli([cmd, ...args], { cwd: dir, env });
        expect(r.code, r.stderr.slice(0, 2000)).toBe(1);
        expect(r.stderr).toMatch(
          /^config\/project\.yaml:10:23: projects\[0\]\.environments\[0\]\.clients\[0\]\.template: template "v{200}…" \(16777016 more\) is not defined/m,
        );
        expect(r.stdout + r.stderr).not.toMatch(ENGINE);
        expect(r.stderr.length).toBeLessThan(4000);
      }
      // Under the default limit, the same file is refused by size, also without a stack trace.
      const limited = await runCli(['validate', '-f', 'config'], { cwd: dir });
      expect(limited.code).toBe(1);
      expect(limited.stderr).toContain('the file is larger than the limit of 5 MB');
    },
    patient(60_000),
  );
});

describe('the folder walk', () => {
  it('does not report an empty folder twice when its only file was refused', async () => {
    const dir = scratch();
    mkdirSync(path.join(dir, 'config'));
    writeFileSync(path.join(dir, 'secret.txt'), MOUNTED_SECRET);
    symlinkSync(path.join(dir, 'secret.txt'), path.join(dir, 'config', 'x.yaml'));
    const r = await runCli(['validate', '-f', 'config'], { cwd: dir });
    expect(r.stderr).not.toContain('folder contains no');
    expect(r.stderr).not.toContain(MOUNTED_SECRET);
  });
});
