// The slowest test files start first (test/support/sequencer.ts): every file its list names is a
// test file of the suite, so a renamed or removed file does not silently fall back to the end.
import { existsSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { repoRoot } from '../support/cli.js';
import { SLOW_FIRST, slowRank } from '../support/sequencer.js';

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
});
