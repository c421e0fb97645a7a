// `export -o adopted/` as README, getting-started and ownership.md show it (issue 39 item 5): a
// trailing slash or an existing folder gets the folder layout (adopted/kms-sync.yaml, planned with
// -f adopted/ and no changes), never a file named `adopted`; `export --env` takes globs, as its
// --help says, matched against the environments the credential sees. Built CLI, emulator.
import { existsSync, mkdirSync, rmSync, statSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runCli } from '../support/cli.js';
import { setup, smallConfig, type Setup } from './helpers.js';

let s: Setup;
beforeAll(async () => {
  s = await setup({
    'kms-sync.yaml': smallConfig.replace(
      '      - type: staging',
      `      - type: production
        url: https://p.example
        templates: [{ name: std, rateLimitDay: 10 }]
      - type: staging`,
    ),
  });
});
afterAll(async () => {
  await s?.emu.close();
  if (s) rmSync(s.dir, { recursive: true, force: true });
});
const cli = (args: string[]) => runCli(args, { cwd: s.dir, env: s.env });

describe('export', () => {
  it('-o adopted/ writes adopted/kms-sync.yaml, which plans with no changes; an existing folder too', async () => {
    expect((await cli(['apply', '--yes'])).code).toBe(0);
    const r = await cli(['export', '--env', 'shop-staging', '-o', 'adopted/']);
    expect(r.code, r.stderr).toBe(0);
    expect(statSync(path.join(s.dir, 'adopted')).isDirectory()).toBe(true);
    expect(existsSync(path.join(s.dir, 'adopted', 'kms-sync.yaml'))).toBe(true);
    expect(r.stderr).toContain(`Wrote ${path.join('adopted', 'kms-sync.yaml')}`);
    const plan = await cli(['plan', '-f', 'adopted/', '--detailed-exitcode']);
    expect(plan.code, plan.stdout + plan.stderr).toBe(0);
    mkdirSync(path.join(s.dir, 'existing'));
    expect((await cli(['export', '--env', 'shop-staging', '-o', 'existing'])).code).toBe(0);
    expect(existsSync(path.join(s.dir, 'existing', 'kms-sync.yaml'))).toBe(true);
    // Written once: a second export refuses to overwrite it.
    const again = await cli(['export', '--env', 'shop-staging', '-o', 'adopted/']);
    expect(again.code).toBe(1);
    expect(again.stderr).toContain('exists; refusing to overwrite it');
  });

  it('--env takes globs, matched against the environments the credential sees', async () => {
    const r = await cli(['export', '--env', 'shop-*']);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stderr).toContain('Exporting 2 environment(s): shop-production, shop-staging');
    expect(r.stdout).toContain('type: production');
    expect(r.stdout).toContain('type: staging');
    const one = await cli(['export', '--env', 'shop-stag?ng']);
    expect(one.code, one.stderr).toBe(0);
    expect(one.stdout).not.toContain('type: production');
    const none = await cli(['export', '--env', 'nope-*']);
    expect(none.code).toBe(1);
    expect(none.stderr).toContain(
      '--env nope-* matches no environment the credential can see (shop-production, shop-staging)',
    );
  });
});
