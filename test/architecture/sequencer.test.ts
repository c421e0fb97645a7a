// The slowest test files start first (test/support/sequencer.ts): every file its list names is a
// test file of the suite, so a renamed or removed file does not silently fall back to the end.
import { existsSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { repoRoot } from '../support/cli.js';
import { fileSeconds, slowFirstBody, withSlowFirst } from '../../scripts/slow-first.js';
import { SLOW_FIRST, slowFirstOrder, slowRank } from '../support/sequencer.js';
import { SHARED_WORKER_FILES } from '../support/shared-workers.js';

describe('slow files first', () => {
  it('names only test files that exist, slowest first', () => {
    const names = Object.keys(SLOW_FIRST);
    for (const name of names) {
      expect(name).toMatch(/^test\/.+\.test\.ts$/);
      expect(existsSync(path.join(repoRoot, name)), name).toBe(true);
    }
    const seconds = Object.values(SLOW_FIRST);
    expect(seconds).toEqual([...seconds].sort((a, b) => b - a));
  });

  it('ranks a listed file by its place and any other file as unlisted', () => {
    expect(slowRank('test/cli/quick-start.test.ts')).toBe(0);
    expect(slowRank('test\\cli\\quick-start.test.ts')).toBe(0);
    expect(slowRank('test/architecture/sequencer.test.ts')).toBe(-1);
  });

  it('starts every file of its own worker before every shared one, each block slowest first, the others in the given order', () => {
    const listed = Object.keys(SLOW_FIRST);
    const sharedListed = listed.filter((f) => SHARED_WORKER_FILES.includes(f));
    const isolatedListed = listed.filter((f) => !SHARED_WORKER_FILES.includes(f));
    // The list has files of both kinds, the shared ones among the isolated ones.
    expect(sharedListed.length).toBeGreaterThan(0);
    expect(listed.indexOf(sharedListed[0]!)).toBeLessThan(listed.indexOf(isolatedListed.at(-1)!));
    const given = [
      'test/x/isolated-unlisted.test.ts',
      'test/x/shared-unlisted.test.ts',
      ...[...listed].reverse(),
      'test/x/isolated-unlisted-2.test.ts',
    ];
    const shared = (f: string) => SHARED_WORKER_FILES.includes(f) || f.includes('shared-');
    expect(slowFirstOrder(given, (f) => f, shared)).toEqual([
      ...isolatedListed,
      'test/x/isolated-unlisted.test.ts',
      'test/x/isolated-unlisted-2.test.ts',
      ...sharedListed,
      'test/x/shared-unlisted.test.ts',
    ]);
  });

  it('scripts/slow-first.ts reads the per-file durations of a CI log or a JSON report, and rewrites the list', () => {
    const log = [
      '\x1b[32m✓\x1b[39m',
      ' \x1b[32m✓\x1b[39m test/a/slow.test.ts \x1b[2m(4 tests)\x1b[22m\x1b[33m 111409\x1b[2mms\x1b[22m\x1b[39m',
      '   ✓ a test of test/a/slow.test.ts 11956ms',
      ' ✓ test/b/quick.test.ts (1 test) 3231ms',
      ' \x1b[32m✓\x1b[39m \x1b[30m\x1b[42m isolated \x1b[49m\x1b[39m test/f/labelled.test.ts \x1b[2m(2 tests)\x1b[22m\x1b[33m 9012\x1b[2mms',
      ' ❯ test/c/failed.test.ts (5 tests | 1 failed) 20500ms',
      ' ↓ test/d/skipped.test.ts (3 tests | 3 skipped)',
    ].join('\n');
    const plain = (s: string) => s.replace(/\x1b\[[0-9;]*m/g, '');
    expect(Object.fromEntries(fileSeconds(plain(log)))).toEqual({
      'test/a/slow.test.ts': 111.409,
      'test/b/quick.test.ts': 3.231,
      'test/f/labelled.test.ts': 9.012,
      'test/c/failed.test.ts': 20.5,
    });
    expect(fileSeconds(log).get('test/a/slow.test.ts')).toBe(111.409);
    const report = JSON.stringify({
      testResults: [{ name: path.join(repoRoot, 'test', 'e', 'x.test.ts'), startTime: 1000, endTime: 9600 }],
    });
    expect(Object.fromEntries(fileSeconds(report, repoRoot))).toEqual({ 'test/e/x.test.ts': 8.6 });
    const body = slowFirstBody(fileSeconds(log), 8);
    expect(body).toBe(
      "  'test/a/slow.test.ts': 111,\n  'test/c/failed.test.ts': 21,\n  'test/f/labelled.test.ts': 9,\n",
    );
    const source = "before\nexport const SLOW_FIRST: Record<string, number> = {\n  'old': 1,\n};\nafter\n";
    expect(withSlowFirst(source, body)).toBe(
      `before\nexport const SLOW_FIRST: Record<string, number> = {\n${body}};\nafter\n`,
    );
  });
});
