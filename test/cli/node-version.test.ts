// A fresh machine with an old Node.js: the CLI says what it needs instead of a stack trace, and
// `npm ci` in the project refuses (engines + engine-strict in .npmrc). Runs against a real older
// node binary when the machine has one (Debian's is 20); skips loudly otherwise.
import { execFile, execFileSync } from 'node:child_process';
import { copyFileSync, existsSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { cliPath, repoRoot } from '../support/cli.js';
import { scratchDir } from '../support/scratch.js';
import { skipWhen, skipTest } from '../support/skip.js';

function findOldNode(): { bin: string; version: string } | undefined {
  for (const bin of ['/usr/bin/node', '/usr/local/bin/node', '/bin/node']) {
    if (!existsSync(bin)) continue;
    try {
      const version = execFileSync(bin, ['--version'], { encoding: 'utf8' }).trim().replace(/^v/, '');
      const [major, minor] = version.split('.').map(Number);
      if (major! < 22 || (major === 22 && minor! < 19)) return { bin, version };
    } catch {
      // not runnable
    }
  }
  return undefined;
}

const old = findOldNode();

function run(bin: string, args: string[], cwd = repoRoot): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(bin, args, { cwd, env: { PATH: process.env.PATH, HOME: process.env.HOME } }, (error, stdout, stderr) => {
      resolve({ code: error ? ((error as { code?: number }).code ?? 1) : 0, stdout, stderr });
    });
  });
}

describe.skipIf(
  skipWhen(!old, 'test/cli/node-version.test.ts: no Node.js older than 22.19 on this machine to run the CLI with'),
)('on a Node.js older than 22.19', () => {
  it('the CLI names the version it needs, the one it found and how to get it, exit 1, no stack trace', async () => {
    for (const args of [['--version'], ['plan', '-f', 'examples'], ['demo']]) {
      const r = await run(old!.bin, [cliPath, ...args]);
      expect(r.code).toBe(1);
      expect(r.stdout).toBe('');
      expect(r.stderr).toContain(`kms-sync needs Node.js >= 22.19.0 (found ${old!.version})`);
      expect(r.stderr).toMatch(/nvm install 22/);
      expect(r.stderr).not.toMatch(/TypeError|at .*\.js:\d+/);
    }
  });

  it('npm ci in the project refuses with the engines requirement (engine-strict)', async (ctx) => {
    const npm = ['/usr/bin/npm', '/usr/local/bin/npm'].find((p) => existsSync(p));
    if (!npm) return skipTest(ctx, 'npm ci check: no npm next to the old node');
    const dir = scratchDir('kms-sync-engines-');
    for (const f of ['package.json', 'package-lock.json', '.npmrc'])
      copyFileSync(path.join(repoRoot, f), path.join(dir, f));
    const r = await run(old!.bin, [npm, 'ci', '--ignore-scripts', '--dry-run', '--offline'], dir);
    expect(r.code).not.toBe(0);
    expect(r.stderr).toMatch(/notsup.*\n.*Required: \{"node":">=22\.19\.0"\}/);
  });
});

it('the current Node.js passes the check', async () => {
  const r = await run(process.execPath, [cliPath, '--version']);
  expect(r.stderr).toBe('');
  expect(r.stdout.trim()).toBe('0.1.0');
});
