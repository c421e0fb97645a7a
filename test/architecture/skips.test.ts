// Skips are loud: every skip in test/ goes through test/support/skip.ts, which prints
// `SKIPPED: <why>`, so a test that did not run never passes silently for one that did.
import { execFile } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { repoRoot } from '../support/cli.js';
import { patient } from '../support/patience.js';

const testDir = path.join(repoRoot, 'test');
/** The helper itself, this file (its rules name what they forbid), and the nested runs' fixtures. */
const EXEMPT = new Set(['support/skip.ts', 'architecture/skips.test.ts']);

function files(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const p = path.join(dir, e.name);
    if (e.isDirectory()) return e.name === 'fixtures' || e.name === 'node_modules' ? [] : files(p);
    return /\.(ts|mts)$/.test(e.name) ? [p] : [];
  });
}

const RULES: [RegExp, string][] = [
  [
    /\.(skip|todo)\s*\(/g,
    'a bare skip (describe.skip, it.skip, ctx.skip, .todo): use skipWhen or skipTest from test/support/skip.ts',
  ],
  [/\.(skipIf|runIf)\s*\((?!\s*skipWhen\()/g, '.skipIf/.runIf without skipWhen(…, why): the skip prints nothing'],
  [/SKIPPED(?!: )/g, 'a SKIPPED line not in the `SKIPPED: <why>` form'],
];

/** `file:line: why` for each skip in `text` that does not go through the helpers. */
function unloudSkips(file: string, text: string): string[] {
  const found: string[] = [];
  for (const [re, why] of RULES) {
    for (const m of text.matchAll(re)) {
      const line = text.slice(0, m.index).split('\n').length;
      found.push(`${file}:${line}: ${why}`);
    }
  }
  return found;
}

describe('skips in test/', () => {
  it('all go through test/support/skip.ts', () => {
    const all = files(testDir);
    expect(all.length).toBeGreaterThan(100);
    const bad = all
      .filter((f) => !EXEMPT.has(path.relative(testDir, f)))
      .flatMap((f) => unloudSkips(path.relative(repoRoot, f), readFileSync(f, 'utf8')));
    expect(bad).toEqual([]);
  });

  it('the rules catch each silent form, and let the helpers through', () => {
    const silent = [
      "describe.skip('x', () => {});",
      "it.skip('x', () => {});",
      'if (!tool) return ctx.skip();',
      "describe.skipIf(!TERRAFORM)('x', () => {});",
      "it.runIf(CI)('x', () => {});",
      "console.warn('SKIPPED the DNS test');",
      "it.todo('later');",
    ];
    for (const s of silent) expect(unloudSkips('f.ts', s), s).toHaveLength(1);
    const loud = [
      "describe.skipIf(skipWhen(!TERRAFORM, 'no terraform'))('x', () => {});",
      "it.skipIf( skipWhen(!bin, 'why'))('x', () => {});",
      "if (!tool) return skipTest(ctx, 'no tool');",
    ];
    for (const s of loud) expect(unloudSkips('f.ts', s), s).toEqual([]);
  });

  it(
    'each helper prints its `SKIPPED: <why>` line (a nested vitest run), and only when it skips',
    async () => {
      const vitest = path.join(repoRoot, 'node_modules', 'vitest', 'vitest.mjs');
      const out = await new Promise<string>((resolve) => {
        execFile(
          process.execPath,
          [vitest, 'run', '--config', 'test/support/fixtures/skips/vitest.config.ts'],
          {
            cwd: repoRoot,
            env: {
              PATH: process.env.PATH,
              HOME: process.env.HOME,
              TMPDIR: process.env.TMPDIR,
              NODE_DISABLE_COMPILE_CACHE: '1',
              NO_COLOR: '1',
            },
            timeout: patient(120_000),
          },
          (error, stdout, stderr) => resolve(`${error ? `exit ${String(error.code)}\n` : ''}${stdout}${stderr}`),
        );
      });
      expect(out).not.toMatch(/^exit /);
      const lines = out
        .split('\n')
        .filter((l) => l.startsWith('SKIPPED: '))
        .sort();
      expect(lines).toEqual([
        'SKIPPED: fixture: a whole describe',
        'SKIPPED: fixture: from inside the test',
        'SKIPPED: fixture: one test',
      ]);
    },
    patient(120_000),
  );
});
