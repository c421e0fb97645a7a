// The run's temporary-folder check (test/support/temp-root.ts) fails a real vitest run: a nested
// run over test/support/fixtures/temp-leak, whose one test leaks as TEMP_LEAK says, with its
// "shared" temporary folder being a scratch folder of this run.
import { execFile } from 'node:child_process';
import { readdirSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { repoRoot } from '../support/cli.js';
import { scratchDir } from '../support/scratch.js';
import { newSharedEntries, leftovers } from '../support/temp-check.js';
import { patient } from '../support/patience.js';

function nestedRun(leak: string, strict = ''): Promise<{ code: number; out: string; shared: string }> {
  const shared = scratchDir('kms-sync-nested-');
  const vitest = path.join(repoRoot, 'node_modules', 'vitest', 'vitest.mjs');
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      [vitest, 'run', '--config', 'test/support/fixtures/temp-leak/vitest.config.ts'],
      {
        cwd: repoRoot,
        env: {
          PATH: process.env.PATH,
          HOME: process.env.HOME,
          TMPDIR: shared,
          NODE_DISABLE_COMPILE_CACHE: '1',
          NO_COLOR: '1',
          TEMP_LEAK: leak,
          TEMP_LEAK_SHARED: shared,
          KMS_SYNC_TEMP_CHECK: strict,
        },
        timeout: patient(120_000),
      },
      (error, stdout, stderr) => {
        const code = error
          ? typeof (error as { code?: unknown }).code === 'number'
            ? (error as { code: number }).code
            : 1
          : 0;
        resolve({ code, out: stdout + stderr, shared });
      },
    );
  });
}

describe('the temporary-folder check of a test run', () => {
  it(
    "passes a run that leaves nothing (a tool's compile cache in the run's folder is not a leak)",
    async () => {
      const r = await nestedRun('cache');
      expect(r.code, r.out).toBe(0);
      expect(readdirSync(r.shared)).toEqual([]);
    },
    patient(120_000),
  );

  it(
    "fails the run and lists (at most 20 of) the files the tests left in the run's folder, then removes it",
    async () => {
      const r = await nestedRun('run');
      expect(r.code, r.out).toBe(1);
      expect(r.out).toContain('temporary-folder check failed');
      expect(r.out).toContain('left 25 entries');
      expect(r.out).toContain('"kms-sync-left-19"');
      expect(r.out).not.toContain('"kms-sync-left-20"');
      expect(r.out).toContain('… and 5 more');
      expect(readdirSync(r.shared)).toEqual([]);
    },
    patient(120_000),
  );

  it(
    "fails the run (in CI, or when strict) on new entries of ours in the shared folder, never on other processes' files",
    async () => {
      const r = await nestedRun('shared', 'strict');
      expect(r.code, r.out).toBe(1);
      expect(r.out).toContain('gained 1 entry of ours');
      expect(r.out).toContain('"kms-sync-stray-1"');
      expect(r.out).not.toContain('someone-elses-file');
    },
    patient(120_000),
  );

  it(
    'only warns about them on a shared machine (not CI)',
    async () => {
      const r = await nestedRun('shared');
      expect(r.code, r.out).toBe(0);
      expect(r.out).toMatch(/warning: the shared temporary folder .* gained 1 entry of ours/);
      expect(r.out).toContain('"kms-sync-stray-1"');
    },
    patient(120_000),
  );
});

describe('which names count', () => {
  it("in the shared folder: new names with our prefixes, except other runs' own folders", () => {
    const before = new Set(['kms-sync-old', 'node-compile-cache']);
    const after = [
      'kms-sync-old',
      'node-compile-cache',
      'kms-sync-vitest-mine',
      'kms-sync-vitest-other',
      'kms-robust-1',
      'tmp-123-abc',
      'tmp.XYZ',
      'systemd-private-1',
      'jsii-kernel-1',
      'plugin123',
      'cdktf-probe4',
      'npm-77-x',
    ];
    expect(newSharedEntries(before, after, 'kms-sync-vitest-mine')).toEqual([
      'jsii-kernel-1',
      'kms-robust-1',
      'npm-77-x',
      'plugin123',
      'tmp-123-abc',
    ]);
    expect(newSharedEntries(new Set(), ['node-compile-cache'], 'x')).toEqual(['node-compile-cache']);
  });

  it("in the run's folder: everything but the compile cache", () => {
    expect(leftovers(['b', 'node-compile-cache', 'a'])).toEqual(['a', 'b']);
  });
});
