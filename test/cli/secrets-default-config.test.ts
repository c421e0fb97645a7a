// `secrets list` without -f reads ./kms-sync.yaml like every other command (issue 39 item 3): with a
// declared default store elsewhere than the built-in local file, it lists what apply wrote there,
// and --reveal finds it, from the configuration folder and from a folder below it. The built CLI
// against the emulator.
import { mkdirSync, rmSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { allOutput, RAW_KEY_PATTERN, runCli } from '../support/cli.js';
import { setup, smallConfig, type Setup } from './helpers.js';

let s: Setup;
beforeAll(async () => {
  // Keys go to a declared default store, not to .kms-sync/secrets.sops.yaml.
  s = await setup({
    'kms-sync.yaml': `${smallConfig}stores:\n  - { name: team, uri: "sops:team-secrets.sops.yaml", default: true }\n`,
  });
});
afterAll(async () => {
  await s?.emu.close();
  if (s) rmSync(s.dir, { recursive: true, force: true });
  for (const text of allOutput) expect(text).not.toMatch(RAW_KEY_PATTERN);
});

describe('secrets list without -f', () => {
  it('uses the default store of ./kms-sync.yaml (or the nearest parent one), as apply did', async () => {
    const apply = await runCli(['apply', '--yes'], { cwd: s.dir, env: s.env });
    expect(apply.code, apply.stdout + apply.stderr).toBe(0);
    const env = { SOPS_AGE_KEY_FILE: s.env.SOPS_AGE_KEY_FILE };
    const here = await runCli(['secrets', 'list'], { cwd: s.dir, env });
    expect(here.code, here.stderr).toBe(0);
    expect(here.stdout).toContain('shop-staging/web/main');
    expect(here.stdout).toContain('shop-staging/app/main');
    expect(here.stdout).toContain('team-secrets.sops.yaml');
    expect(here.stdout).not.toMatch(/\b0 secret\(s\)/);
    const sub = path.join(s.dir, 'sub');
    mkdirSync(sub);
    const below = await runCli(['secrets', 'list', '--json'], { cwd: sub, env });
    expect(below.code, below.stderr).toBe(0);
    expect((JSON.parse(below.stdout) as { secrets: { name: string }[] }).secrets.map((x) => x.name).sort()).toEqual([
      'shop-staging/app/main',
      'shop-staging/web/main',
    ]);
    const reveal = await runCli(['secrets', 'list', '--reveal', 'shop-staging/web/main'], { cwd: s.dir, env });
    expect(reveal.code, reveal.stderr).toBe(0);
    expect(reveal.stdout).toMatch(/kmsc_/);
    allOutput.splice(allOutput.indexOf(reveal.stdout), 1); // asked for: the one output that holds a value
  });
});
