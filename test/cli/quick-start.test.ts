// The README quick start on a fresh machine. Its first command, `npm ci && npm run demo`, runs in a
// fresh clone of the committed tree with a fresh HOME (slow, an npm ci: only when CI is set or
// KMS_SYNC_QUICKSTART_TEST=1, and never inside its own clone). Its second, `npm test`, is what
// .ci/run itself runs on a clean clone after `npm ci`: that run is its proof, so it is not run a
// second time here (it cost ~26 of this file's ~64 CPU-s: lint, build and typecheck again); the
// first test checks that the two still name the same command.
import { execFile } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { expect, it } from 'vitest';
import { RAW_KEY_PATTERN, repoRoot } from '../support/cli.js';
import { scratchDir } from '../support/scratch.js';
import { skipWhen } from '../support/skip.js';
import { patient } from '../support/patience.js';

const ci = Boolean(process.env.CI) && process.env.CI !== 'false' && process.env.CI !== '0';
const enabled = (ci || process.env.KMS_SYNC_QUICKSTART_TEST === '1') && process.env.KMS_SYNC_QUICKSTART_CLONE !== '1';

function sh(
  cmd: string,
  args: string[],
  cwd: string,
  env: NodeJS.ProcessEnv,
): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(
      cmd,
      args,
      { cwd, env, maxBuffer: 64 * 1024 * 1024, timeout: patient(480_000) },
      (error, stdout, stderr) => {
        resolve({ code: error ? Number((error as { code?: unknown }).code ?? 1) : 0, stdout, stderr });
      },
    );
  });
}

it('the test command of the README quick start is the one CI runs on a clean clone after npm ci', () => {
  const readme = readFileSync(path.join(repoRoot, 'README.md'), 'utf8');
  const quickStart = readme.slice(readme.indexOf('## Quick start'));
  const block = /```sh\n([\s\S]*?)```/.exec(quickStart)?.[1] ?? '';
  const commands = block
    .split('\n')
    .map((line) => line.replace(/#.*$/, '').trim())
    .filter(Boolean);
  expect(commands).toEqual(['npm ci && npm run demo', 'npm test']);
  const ci = readFileSync(path.join(repoRoot, '.ci', 'run'), 'utf8')
    .split('\n')
    .map((line) => line.trim())
    .filter((line) => line && !line.startsWith('#'));
  expect(ci.at(-1)).toBe('npm test');
  expect(ci.some((line) => /^npm ci( |$)/.test(line))).toBe(true);
});

it.skipIf(
  skipWhen(
    !enabled,
    'test/cli/quick-start.test.ts: slow (fresh clone + npm ci); runs when CI is set or KMS_SYNC_QUICKSTART_TEST=1',
  ),
)(
  'npm ci && npm run demo in a fresh clone with a fresh HOME',
  async () => {
    const root = scratchDir('kms-sync-quickstart-');
    const home = path.join(root, 'home');
    mkdirSync(home);
    const clone = path.join(root, 'kms-sync');
    const git = await sh('git', ['clone', '--quiet', '--no-hardlinks', repoRoot, clone], root, {
      PATH: process.env.PATH,
      HOME: home,
    });
    expect(git.code, git.stderr).toBe(0);
    // The npm cache of this machine is reused (read-only use, --prefer-offline): no network beyond npm's.
    const npmCache = process.env.npm_config_cache ?? path.join(process.env.HOME ?? home, '.npm');
    // npm's own compile cache and every temporary file stay in this run's temporary folder.
    // The machine's network settings stay (a fresh HOME, not a fresh network): its CA certificates
    // and proxy, without which npm cannot reach the registry behind an intercepting proxy.
    const network = Object.fromEntries(
      [
        'NODE_EXTRA_CA_CERTS',
        'SSL_CERT_FILE',
        'SSL_CERT_DIR',
        'HTTPS_PROXY',
        'https_proxy',
        'HTTP_PROXY',
        'http_proxy',
        'NO_PROXY',
        'no_proxy',
      ]
        .filter((k) => process.env[k] !== undefined)
        .map((k) => [k, process.env[k]]),
    );
    const env = {
      ...network,
      PATH: process.env.PATH,
      HOME: home,
      TMPDIR: tmpdir(),
      NODE_DISABLE_COMPILE_CACHE: '1',
      npm_config_cache: npmCache,
      KMS_SYNC_QUICKSTART_CLONE: '1',
      NO_COLOR: '1',
    };

    const install = await sh('npm', ['ci', '--prefer-offline', '--no-audit', '--no-fund'], clone, env);
    expect(install.code, install.stderr.slice(-2000)).toBe(0);
    const demo = await sh('npm', ['run', 'demo'], clone, env);
    expect(demo.code, demo.stderr.slice(-2000)).toBe(0);
    expect(demo.stdout).toContain('Apply complete!');
    expect(demo.stdout).toContain('No changes.');
    // One owner from the first plan to the last, inside a git checkout too (issue 25).
    expect(demo.stdout).not.toContain('owned by configuration');
    expect(demo.stdout + demo.stderr).not.toMatch(RAW_KEY_PATTERN);
    // Everything the demo wrote is in one folder of the current directory; nothing in HOME.
    expect(existsSync(path.join(clone, '.kms-sync-demo', 'age-keys.txt'))).toBe(true);
    expect(existsSync(path.join(home, '.config', 'sops'))).toBe(false);
  },
  patient(900_000),
);
