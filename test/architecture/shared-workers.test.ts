// The test files that share worker processes (test/support/shared-workers.ts, vitest `isolate: false`)
// exist, and none of them changes what the next file of its worker would find: mocks, stubs, fake
// timers, the process's environment, working directory or globals.
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { repoRoot } from '../support/cli.js';
import { SHARED_WORKER_FILES } from '../support/shared-workers.js';
import config from '../../vitest.config.js';

/** What a file of a shared worker must not do (a change to process.env undone in a finally is named in the file's review, not here). */
const LEAKS: [RegExp, string][] = [
  [/\bvi\.(mock|doMock|stubEnv|stubGlobal|useFakeTimers|setSystemTime)\(/, 'mocks, stubs or fake timers'],
  [/process\.env(\.\w+|\[[^\]]+\])\s*=[^=]|delete process\.env/, 'changes process.env'],
  [/process\.chdir\(/, 'changes the working directory'],
  [/globalThis\.\w+\s*=[^=]/, 'sets a global'],
];
/** Files whose change to process.env is undone before the file ends (read, with the line, when one is added). */
const RESTORES_ENV = new Set(['test/architecture/patience.test.ts', 'test/config/interpolate.test.ts']);

describe('files of shared workers', () => {
  it('are test files of the suite, each named once', () => {
    for (const file of SHARED_WORKER_FILES) {
      expect(file).toMatch(/^test\/.+\.test\.ts$/);
      expect(existsSync(path.join(repoRoot, file)), file).toBe(true);
    }
    expect(new Set(SHARED_WORKER_FILES).size).toBe(SHARED_WORKER_FILES.length);
  });

  it('run in the shared project only, every other file in the isolated one (each file once)', () => {
    const test = config.test!;
    // A root `include` is added to each project's own (extends: true): every file would run twice.
    expect(test.include).toBeUndefined();
    const projects = test.projects as {
      test: { name: string; include: string[]; exclude?: string[]; isolate?: boolean };
    }[];
    const shared = projects.find((p) => p.test.name === 'shared')!.test;
    const isolated = projects.find((p) => p.test.name === 'isolated')!.test;
    expect(shared).toMatchObject({ include: SHARED_WORKER_FILES, isolate: false });
    expect(isolated.include).toEqual(['test/**/*.test.ts']);
    expect(isolated.exclude).toEqual(expect.arrayContaining(SHARED_WORKER_FILES));
  });

  it('leave nothing behind for the next file of their worker', () => {
    const found: string[] = [];
    for (const file of SHARED_WORKER_FILES) {
      const text = readFileSync(path.join(repoRoot, file), 'utf8');
      for (const [pattern, what] of LEAKS) {
        if (what === 'changes process.env' && RESTORES_ENV.has(file)) continue;
        if (pattern.test(text)) found.push(`${file}: ${what}`);
      }
    }
    expect(found).toEqual([]);
  });
});
