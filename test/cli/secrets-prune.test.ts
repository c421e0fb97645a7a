// `secrets list` marks secrets whose key is gone from the live service, and `secrets prune` removes
// them: it asks on a terminal, takes --yes in scripts, refuses without --yes when stdin is no
// terminal, and never touches a secret of another service target, one that records no target, or
// one whose key still exists. CLI as a process against the emulator; the store read back directly.
import { rmSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SopsFileStore } from '../../src/secrets/index.js';
import { allOutput, RAW_KEY_PATTERN, runCli } from '../support/cli.js';
import { cliCommand, runInTty, setup, TEST_KEY, type Setup } from './helpers.js';

let s: Setup;
let store: SopsFileStore;
const meta = (client: string, target?: string) => ({
  projectEnv: 'shop-staging',
  client,
  key: 'main',
  keyId: `id-${client}`,
  issuedAt: '2026-01-01T00:00:00Z',
  ...(target ? { target } : {}),
});
beforeAll(async () => {
  s = await setup();
  store = new SopsFileStore(path.join(s.dir, '.kms-sync', 'secrets.sops.yaml'), { env: s.env });
});
afterAll(async () => {
  await s?.emu.close();
  rmSync(s.dir, { recursive: true, force: true });
  for (const text of allOutput) expect(text).not.toMatch(RAW_KEY_PATTERN);
});
const cli = (args: string[], env: NodeJS.ProcessEnv = s.env) => runCli(args, { cwd: s.dir, env });

describe('secrets of deleted keys', () => {
  it("list marks them; prune refuses without --yes off a terminal, asks on one, and removes only this service's gone ones", async () => {
    expect((await cli(['apply', '--yes'])).code).toBe(0);
    // The client app is deleted in the live service (by hand); web stays.
    const headers = { 'x-api-key': TEST_KEY };
    const app = (
      (await (await fetch(`${s.emu.url}/client?project_env=shop-staging&limit=100`, { headers })).json()) as {
        data: { id: string; name: string }[];
      }
    ).data.find((c) => c.name === 'app')!;
    expect(
      (await fetch(`${s.emu.url}/client/${app.id}?project_env=shop-staging`, { method: 'DELETE', headers })).ok,
    ).toBe(true);
    // Secrets of the same (deleted) client recorded for another service, and with no service at all.
    await store.putMany([
      {
        name: 'shop-staging/app/elsewhere',
        value: 'other-service-value',
        meta: meta('app', 'https://kms.other.example/api/v1#test'),
      },
      { name: 'shop-staging/app/untargeted', value: 'legacy-value', meta: meta('app') },
    ]);

    const list = await cli(['secrets', 'list']);
    expect(list.code, list.stderr).toBe(0);
    expect(list.stdout).toMatch(/shop-staging\/app\/main .*KEY GONE: client shop-staging\/app was deleted/);
    expect(list.stdout).not.toMatch(/shop-staging\/web\/main .*KEY GONE/);
    expect(list.stdout).not.toMatch(/elsewhere .*KEY GONE|untargeted .*KEY GONE/);
    expect(list.stdout).toContain('1 secret(s) hold a key that no longer exists: kms-sync secrets prune removes them');
    const json = JSON.parse((await cli(['secrets', 'list', '--json'])).stdout) as {
      secrets: { name: string; key_state?: string }[];
    };
    expect(Object.fromEntries(json.secrets.map((x) => [x.name, x.key_state]))).toEqual({
      'shop-staging/app/elsewhere': 'unchecked',
      'shop-staging/app/main': 'gone',
      'shop-staging/app/untargeted': 'unchecked',
      'shop-staging/web/main': 'live',
    });
    // Without a service: listed as before, with the hint.
    expect((await cli(['secrets', 'list'], { SOPS_AGE_KEY_FILE: s.env.SOPS_AGE_KEY_FILE })).stdout).toContain(
      'Set KMS_API_URL and KMS_API_KEY to mark',
    );

    const refused = await cli(['secrets', 'prune']);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toContain('stdin is not a terminal to ask on');
    expect((await store.list()).length).toBe(4);

    const no = await runInTty(cliCommand(['secrets', 'prune']), {
      cwd: s.dir,
      env: s.env,
      answer: 'no',
      prompt: /accepted: /,
    });
    expect(no.code).toBe(1);
    expect(no.output).toContain('Prune cancelled.');
    expect((await store.list()).length).toBe(4);

    const yes = await runInTty(cliCommand(['secrets', 'prune']), {
      cwd: s.dir,
      env: s.env,
      answer: 'yes',
      prompt: /accepted: /,
    });
    expect(yes.code, yes.output).toBe(0);
    expect(yes.output).toContain('- shop-staging/app/main: client shop-staging/app was deleted');
    expect(yes.output).toContain('Removed 1 secret(s)');
    expect((await store.list()).map((x) => x.name).sort()).toEqual([
      'shop-staging/app/elsewhere',
      'shop-staging/app/untargeted',
      'shop-staging/web/main',
    ]);
    // What stays still decrypts (the file was rewritten whole and verified).
    expect(await store.read('shop-staging/app/elsewhere')).toBe('other-service-value');
    expect(await store.read('shop-staging/web/main')).toMatch(/^kmsc_/);

    const again = await cli(['secrets', 'prune', '--yes']);
    expect(again.code).toBe(0);
    expect(again.stdout).toContain('Nothing to prune');
    expect(again.stdout).toContain('2 secret(s) of another service, or recording none, were not checked and are kept');
  });

  it('a secret replaced by a new key after it was judged gone is kept (the removal checks its key id)', async () => {
    await store.putMany([
      { name: 'shop-staging/gone/main', value: 'v1', meta: { ...meta('gone', undefined), keyId: 'old' } },
    ]);
    expect(await store.deleteMany([{ name: 'shop-staging/gone/main', keyId: 'not-the-current-one' }])).toEqual([]);
    expect(await store.exists('shop-staging/gone/main')).toBe(true);
    expect(await store.deleteMany([{ name: 'shop-staging/gone/main', keyId: 'old' }])).toEqual([
      'shop-staging/gone/main',
    ]);
    expect(await store.exists('shop-staging/gone/main')).toBe(false);
  });
});
