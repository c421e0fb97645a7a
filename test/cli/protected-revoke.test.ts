// The deletion guard holds the revoke of a key of a client the live service marks protected, in
// the CLI's plan and apply (plan/deletion-guard.ts tallyRemovals), even when the same change takes
// `protected: true` off the client: the live marker is what counts until the apply has run.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { patient } from '../support/patience.js';
import { allOutput, RAW_KEY_PATTERN, runCli } from '../support/cli.js';
import { setup, smallConfig, type Setup } from './helpers.js';

// helpers.ts's small configuration with its `web` client as given.
const config = (web: string) => smallConfig.replace('{ name: web, template: std, keys: [{ name: main }] }', web);

let s: Setup;
beforeAll(async () => {
  s = await setup({
    'protected.yaml': config('{ name: web, template: std, protected: true, keys: [{ name: main }, { name: spare }] }'),
    // protected taken off and a key dropped, in one change
    'unprotected.yaml': config('{ name: web, template: std, keys: [{ name: main }] }'),
  });
});
afterAll(async () => {
  await s?.emu.close();
  for (const text of allOutput) expect(text).not.toMatch(RAW_KEY_PATTERN);
});

const cli = (args: string[]) =>
  runCli(args, { cwd: s.dir, env: { ...s.env, KMS_SYNC_ALLOW_LOCAL_STORE: '1', NO_COLOR: '1' } });

describe('a key of a protected client', () => {
  it(
    'is held by the plan and the apply, the rest applied',
    async () => {
      const made = await cli(['apply', '-f', 'protected.yaml', '--auto-approve']);
      expect(made.code, made.stderr).toBe(0);
      const plan = await cli(['plan', '-f', 'unprotected.yaml']);
      expect(plan.code, plan.stderr).toBe(0);
      expect(plan.stdout).toContain(
        'apply will hold the 1 deletes of this plan (1 key(s) of a protected client would be revoked (key.shop-staging/web/spare))',
      );
      const applied = await cli(['apply', '-f', 'unprotected.yaml', '--auto-approve']);
      expect(applied.stdout).toContain(
        'Deletes held: 1 key(s) of a protected client would be revoked (key.shop-staging/web/spare).',
      );
      expect(applied.stdout).toContain('Resources: 0 created, 1 updated, 0 replaced, 0 rotated, 0 destroyed.');
    },
    patient(60_000),
  );
});
