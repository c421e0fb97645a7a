// The commands around plan/apply: offline validate, init, --env scoping, live-credential safety,
// the interactive confirmation (through a real pseudo-terminal), and the demo.
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startEmulator, type RunningEmulator } from '../../src/emulator/index.js';
import { allOutput, RAW_KEY_PATTERN, runCli, workspace } from '../support/cli.js';
import { cliCommand, runInTty } from '../cli/helpers.js';

const TEST_KEY = 'sk_test_commands012345';
// A fake live-mode project key for the emulator, assembled at run time so secret scanners do not
// mistake the fixture for a leaked credential.
const LIVE_KEY = ['sk', 'live', 'commands012345'].join('_');

const config = `apiVersion: kms-sync/v1
projects:
  - slug: multi
    name: Multi
    environments:
      - type: production
        url: https://p.example
        templates: [{ name: std, rateLimitDay: 10 }]
        clients: [{ name: a, template: std, keys: [{ name: k }] }]
      - type: staging
        url: https://s.example
        templates: [{ name: std, rateLimitDay: 10 }]
        clients: [{ name: a, template: std, keys: [{ name: k }] }]
`;

let emu: RunningEmulator;
let dir: string;
let env: NodeJS.ProcessEnv;

beforeAll(async () => {
  emu = await startEmulator({ port: 0, apiKeys: [TEST_KEY, LIVE_KEY] });
  dir = workspace({ 'cfg/main.yaml': config });
  env = { KMS_API_URL: emu.url, KMS_API_KEY: TEST_KEY, SOPS_AGE_KEY_FILE: path.join(dir, 'age.txt') };
});
afterAll(async () => {
  await emu?.close();
  for (const text of allOutput) {
    expect(text).not.toMatch(RAW_KEY_PATTERN);
    expect(text).not.toContain(LIVE_KEY);
  }
});

describe('commands', () => {
  it('validate works offline, without credentials', async () => {
    const r = await runCli(['validate', '-f', 'cfg'], { cwd: dir, env: {} });
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toContain('Configuration valid: 1 file(s), 1 project(s), 2 environment(s)');
  });

  it('refuses two keys that would write one secret (one key would be lost), naming both places', async () => {
    const w = workspace({
      'c/main.yaml': `apiVersion: kms-sync/v1
projects:
  - slug: twin
    name: Twin
    environments:
      - type: production
        url: https://t.example
        templates: [{ name: std, rateLimitDay: 10 }]
        clients:
          - name: a
            template: std
            keys: [{ name: k, secret: { name: shared/slot } }]
          - name: b
            template: std
            keys: [{ name: k, secret: { name: shared/slot } }]
`,
    });
    for (const args of [
      ['validate', '-f', 'c'],
      ['plan', '-f', 'c'],
    ]) {
      const r = await runCli(args, { cwd: w, env: { ...env } });
      expect(r.code).toBe(1);
      expect(r.stderr).toMatch(
        /key\.twin-production\/a\/k \(c\/main\.yaml:12:\d+\) and key\.twin-production\/b\/k \(c\/main\.yaml:15:\d+\) would both write the secret "shared\/slot"/,
      );
    }
  });

  it('init writes a starter file that references the schema and validates', async () => {
    const w = workspace();
    const r = await runCli(['init', 'kms.yaml'], { cwd: w, env: {} });
    expect(r.code, r.stderr).toBe(0);
    const text = readFileSync(path.join(w, 'kms.yaml'), 'utf8');
    // The $schema line works from this project on any machine: a copy beside the file, the same
    // text `kms-sync schema` prints.
    expect(text.split('\n')[0]).toBe('# yaml-language-server: $schema=./kms-sync.schema.json');
    const schema = await runCli(['schema'], { cwd: w, env: {} });
    expect(JSON.parse(schema.stdout).$id).toBe('https://kms-sync.dev/schemas/kms-sync.schema.json');
    expect(readFileSync(path.join(w, 'kms-sync.schema.json'), 'utf8')).toBe(schema.stdout);
    // The folder still validates: the schema copy is not mistaken for configuration.
    expect((await runCli(['validate', '-f', '.'], { cwd: w, env: {} })).code).toBe(0);
    const again = await runCli(['init', 'kms.yaml'], { cwd: w, env: {} });
    expect(again.code).toBe(1);
    // `init -` prints exactly what the file form writes here, and says how to get the schema copy.
    const printed = await runCli(['init', '-'], { cwd: w, env: {} });
    expect(printed.stdout).toBe(text);
    // It declares an owner id, derived where the file goes and written down so that it never moves.
    expect(text).toContain(`\nowner: "local:${path.basename(w)}"\n`);
    const fresh = workspace();
    const elsewhere = await runCli(['init', '-'], { cwd: fresh, env: {} });
    expect(elsewhere.stdout).toBe(
      text.replace(`owner: "local:${path.basename(w)}"`, `owner: "local:${path.basename(fresh)}"`),
    );
    expect(elsewhere.stderr).toContain('kms-sync schema > kms-sync.schema.json');
  });

  it('--env limits a run to the selected environments (globs allowed) and rejects a typo', async () => {
    const r = await runCli(['apply', '-f', 'cfg', '--env', 'multi-stag*', '--auto-approve', '--json'], {
      cwd: dir,
      env,
    });
    expect(r.code, r.stderr).toBe(0);
    // apply --json is a JSON-lines event stream (schemas/kms-sync-apply-events.schema.json).
    const addresses = r.stdout
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l))
      .filter((e: any) => e.type === 'planned_change')
      .map((e: any) => e.change.address);
    expect(addresses.every((a: string) => !a.includes('multi-production'))).toBe(true);
    expect(addresses).toContain('client.multi-staging/a');
    const typo = await runCli(['plan', '-f', 'cfg', '--env', 'multi-prod'], { cwd: dir, env });
    expect(typo.code).toBe(1);
    expect(typo.stderr).toContain('matches no environment');
  });

  it('refuses to apply without a terminal and without --auto-approve', async () => {
    const r = await runCli(['apply', '-f', 'cfg'], { cwd: dir, env });
    expect(r.code).toBe(1);
    expect(r.stderr).toContain('--auto-approve');
  });

  it('with a live credential, says so and asks for the environment slugs on a terminal', async () => {
    const liveEnv = { ...env, KMS_API_KEY: LIVE_KEY };
    const wrong = await runInTty(cliCommand(['apply', '-f', 'cfg', '--env', 'multi-production']), {
      cwd: dir,
      env: liveEnv,
      answer: 'yes',
    });
    expect(wrong.output).toContain('LIVE credential (sk_live_)');
    expect(wrong.output).toContain('Type the environment slug(s) to confirm (multi-production)');
    expect(wrong.output).toContain('Apply cancelled.');
    expect(wrong.code).toBe(1);
    const r = await fetch(`${emu.url}/client?project_env=multi-production`, { headers: { 'x-api-key': TEST_KEY } });
    expect(r.status).toBe(404); // nothing was created
    const right = await runInTty(cliCommand(['apply', '-f', 'cfg', '--env', 'multi-production']), {
      cwd: dir,
      env: liveEnv,
      answer: 'multi-production',
    });
    expect(right.output, right.output).toContain('Apply complete!');
    expect(right.code).toBe(0);
  });

  it('the live confirmation takes the slugs as the header lists them ("a, b"), and says why it cancels (issue 39)', async () => {
    const liveEnv = { ...env, KMS_API_KEY: LIVE_KEY };
    // A change in both environments, whatever the tests before applied.
    writeFileSync(
      path.join(dir, 'cfg', 'main.yaml'),
      config.replace('https://p.example', 'https://p2.example').replace('https://s.example', 'https://s2.example'),
    );
    const short = await runInTty(cliCommand(['apply', '-f', 'cfg', '--env', 'multi-*']), {
      cwd: dir,
      env: liveEnv,
      answer: 'multi-production',
    });
    expect(short.output).toContain('Environments: multi-production, multi-staging');
    expect(short.output).toContain(
      'The answer must name every environment slug of this run (multi-production, multi-staging); missing: multi-staging.',
    );
    expect(short.output).toContain('Apply cancelled.');
    expect(short.code).toBe(1);
    const spaced = await runInTty(cliCommand(['apply', '-f', 'cfg', '--env', 'multi-*']), {
      cwd: dir,
      env: liveEnv,
      answer: 'multi-staging, multi-production',
    });
    expect(spaced.output, spaced.output).toContain('Apply complete!');
    expect(spaced.code).toBe(0);
  });

  it('the demo applies the examples to an in-process emulator and ends with no changes', async () => {
    const w = workspace();
    const r = await runCli(['demo'], { cwd: w, env: { SOPS_AGE_KEY_FILE: path.join(w, 'age.txt') } });
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toContain('Apply complete!');
    expect(r.stdout).toMatch(/Keys issued and stored \(\d+\)/);
    expect(r.stdout.split('Planning again')[1]).toContain('No changes.');
    expect(existsSync(path.join(w, '.kms-sync-demo', '.kms-sync', 'secrets.sops.yaml'))).toBe(true);
  });
});
