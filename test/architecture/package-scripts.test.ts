// The npm scripts name files of this repository (scripts/, bench/, test/crash/): each one must
// exist, and the crash campaign's TypeScript entry must load under the hook `npm run crash` gives
// it. A file moved or removed without its script (as test/secrets/fixtures/ts-resolve.mjs once
// was) would otherwise only show when someone runs `npm run crash` or `npm run bench`.
import { execFileSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { repoRoot } from '../support/cli.js';

const scripts = (
  JSON.parse(readFileSync(path.join(repoRoot, 'package.json'), 'utf8')) as { scripts: Record<string, string> }
).scripts;

/** Words of a script that are paths of files in this repository (a folder and a script extension). */
function filesNamed(script: string): string[] {
  return script
    .split(/\s+/)
    .filter((w) => /^(\.\/)?[\w.-]+\/[\w./-]+\.(?:[cm]?js|ts)$/.test(w) && !w.startsWith('node_modules/'));
}

describe('npm scripts', () => {
  it('name only files that exist', () => {
    const named = Object.entries(scripts).flatMap(([name, script]) =>
      filesNamed(script).map((file) => ({ name, file })),
    );
    expect(named.map((n) => n.file)).toContain('test/crash/run.ts');
    const missing = named.filter(({ file }) => !existsSync(path.join(repoRoot, file)));
    expect(missing).toEqual([]);
  });

  it('npm run crash: its entry loads with the hook the script gives it', () => {
    const crash = scripts.crash!;
    const hook = /--import (\S+)/.exec(crash)?.[1];
    expect(hook).toBeDefined();
    // Only the entry's imports are resolved (lib.ts and what it imports), nothing is run.
    const out = execFileSync(
      process.execPath,
      ['--import', hook!, '--input-type=module', '-e', "await import('./test/crash/lib.ts'); console.log('loaded')"],
      { cwd: repoRoot, encoding: 'utf8', env: { PATH: process.env.PATH, NODE_DISABLE_COMPILE_CACHE: '1' } },
    );
    expect(out.trim()).toBe('loaded');
  });
});
