// Issue 25 item 3, end to end against the emulator over HTTP: the export of one environment of a
// two-environment project references the project (external: true) instead of defining it, so that
// planning or applying the export under the owner of what it names touches nothing else: the
// sibling environment and its clients are not in scope, never "left the configuration". The export
// of every environment of the project still defines it. An external project that does not exist
// stops the plan with a clear message.
import { mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startEmulator, type RunningEmulator } from '../../src/emulator/index.js';
import { allOutput, RAW_KEY_PATTERN, runCli, workspace } from '../support/cli.js';
import { patient } from '../support/patience.js';

const API_KEY = 'sk_test_exportscope0123456';

const CONFIG = `apiVersion: kms-sync/v1
owner: team-a
projects:
  - slug: duo
    name: Duo
    environments:
      - type: production
        url: https://duo.example
        templates: [{ name: std, rateLimitDay: 1000 }]
        clients:
          - { name: alpha, template: std, keys: [{ name: main }] }
      - type: staging
        url: https://staging.duo.example
        templates: [{ name: std, rateLimitDay: 10 }]
        clients:
          - { name: sigma, template: std, keys: [{ name: main }] }
`;

let emu: RunningEmulator;
let dir: string;
let env: NodeJS.ProcessEnv;
const cli = (args: string[]) => runCli(args, { env, cwd: dir });
const write = (rel: string, text: string) => {
  mkdirSync(path.dirname(path.join(dir, rel)), { recursive: true });
  writeFileSync(path.join(dir, rel), text);
};
const liveClients = async (pe: string) =>
  (
    (
      (await (
        await fetch(`${emu.url}/client?project_env=${pe}&limit=100`, { headers: { 'x-api-key': API_KEY } })
      ).json()) as any
    ).data ?? []
  )
    .map((c: any) => c.name)
    .sort();
const planJson = async (folder: string, code: number, ...extra: string[]) => {
  const r = await cli(['plan', '-f', folder, '--json', '--detailed-exitcode', '--no-secret-check', ...extra]);
  expect(r.code, r.stdout + r.stderr).toBe(code);
  return JSON.parse(r.stdout) as {
    target: { environments: string[]; projects: string[] };
    unmanaged: unknown[];
    warnings: string[];
    resource_changes: { address: string; change: { action: string; reason: string } }[];
  };
};

beforeAll(async () => {
  emu = await startEmulator({ port: 0, apiKeys: [API_KEY] });
  dir = workspace({ 'team-a/kms.yaml': CONFIG });
  env = {
    KMS_API_URL: emu.url,
    KMS_API_KEY: API_KEY,
    SOPS_AGE_KEY_FILE: path.join(dir, 'age', 'keys.txt'),
    KMS_SYNC_ALLOW_LOCAL_STORE: '1',
  };
  const applied = await cli(['apply', '-f', 'team-a', '--auto-approve']);
  expect(applied.code, applied.stdout + applied.stderr).toBe(0);
}, patient(60_000));
afterAll(async () => {
  await emu?.close();
  if (dir) rmSync(dir, { recursive: true, force: true });
  for (const text of allOutput) expect(text).not.toMatch(RAW_KEY_PATTERN);
});

describe('export of part of a project', () => {
  it(
    'references the project, and planning or applying it under the live owner touches no other environment',
    async () => {
      const exp = await cli(['export', '--env', 'duo-production', '-o', 'one/kms.yaml']);
      expect(exp.code, exp.stderr).toBe(0);
      const text = readFileSync(path.join(dir, 'one', 'kms.yaml'), 'utf8');
      expect(text).toMatch(/- slug: duo\n {4}external: true\n/);
      expect(text).not.toContain('name: Duo');
      expect(text).not.toContain('staging');

      // Planned with the live owner: no changes, and the sibling environment is not even read.
      write('one/kms.yaml', text.replace(/^owner: .*$/m, 'owner: team-a'));
      const owned = await cli(['plan', '-f', 'one', '--detailed-exitcode', '--no-secret-check']);
      expect(owned.code, owned.stdout + owned.stderr).toBe(0);
      expect(owned.stdout).toContain('No changes.');
      expect(owned.stdout + owned.stderr).not.toContain('staging');
      const plan = await planJson('one', 0);
      expect(plan.resource_changes).toEqual([]);
      expect(plan.unmanaged).toEqual([]);
      expect(plan.target.environments).toEqual(['duo-production']);
      expect(plan.target.projects).toEqual([]);

      // Under the owner export wrote, with --take-ownership: it claims what it names and nothing else.
      write('one/kms.yaml', text);
      const taken = await planJson('one', 2, '--take-ownership');
      expect(taken.target.environments).toEqual(['duo-production']);
      expect(taken.resource_changes.map((c) => [c.address, c.change.action])).toEqual([
        ['client.duo-production/alpha', 'update'],
      ]);
      expect(taken.resource_changes[0]!.change.reason).toContain('claimed by this configuration');

      // Applying it (and with --prune) leaves the sibling environment and its clients alone.
      const applied = await cli([
        'apply',
        '-f',
        'one',
        '--take-ownership',
        '--prune',
        '--auto-approve',
        '--no-secret-check',
      ]);
      expect(applied.code, applied.stdout + applied.stderr).toBe(0);
      expect(await liveClients('duo-staging')).toEqual(['sigma']);
      expect(await liveClients('duo-production')).toEqual(['alpha']);
      // Destroying it removes what it names (its environment, now its own), never the project or
      // the project's other environment.
      const destroy = await cli(['destroy', '-f', 'one', '--auto-approve']);
      expect(destroy.code, destroy.stdout + destroy.stderr).toBe(0);
      expect(destroy.stdout).toContain('env.duo-production');
      expect(destroy.stdout).not.toContain('project.duo');
      expect(destroy.stdout).not.toContain('duo-staging');
      expect(await liveClients('duo-staging')).toEqual(['sigma']);
      const projects = (await (await fetch(`${emu.url}/project`, { headers: { 'x-api-key': API_KEY } })).json()) as any;
      expect(JSON.stringify(projects)).toContain('"duo-staging"');
      expect(JSON.stringify(projects)).not.toContain('"duo-production"');
      // Back as it was, for the next scenario.
      expect((await cli(['apply', '-f', 'team-a', '--auto-approve'])).code).toBe(0);
    },
    patient(60_000),
  );

  it(
    'the export of every environment of the project still defines it, and plans no changes',
    async () => {
      const exp = await cli(['export', '--env', 'duo-production', '--env', 'duo-staging', '-o', 'all/kms.yaml']);
      expect(exp.code, exp.stderr).toBe(0);
      const text = readFileSync(path.join(dir, 'all', 'kms.yaml'), 'utf8');
      expect(text).toMatch(/- slug: duo\n {4}name: Duo\n/);
      expect(text).not.toContain('external');
      write('all/kms.yaml', text.replace(/^owner: .*$/m, 'owner: team-a'));
      const plan = await planJson('all', 0);
      expect(plan.resource_changes).toEqual([]);
      expect(plan.target.environments).toEqual(['duo-production', 'duo-staging']);
      expect(plan.target.projects).toEqual(['duo']);
    },
    patient(60_000),
  );

  it(
    'a plan that would create an environment of an external project that does not exist stops, saying so',
    async () => {
      write(
        'ghost/kms.yaml',
        `apiVersion: kms-sync/v1
owner: ghosts
projects:
  - slug: ghost
    external: true
    environments:
      - { type: production, url: https://ghost.example }
`,
      );
      const r = await cli(['plan', '-f', 'ghost']);
      expect(r.code).toBe(1);
      expect(r.stderr).toContain('project "ghost" is external (ghost/kms.yaml:4 projects[0])');
      expect(r.stderr).toContain('environment(s) ghost-production cannot be created in it');
      // An external project that exists: its new environment is planned, the project is not.
      write(
        'ghost/kms.yaml',
        readFileSync(path.join(dir, 'ghost', 'kms.yaml'), 'utf8')
          .replace(/ghost/g, 'duo')
          .replace('production', 'preview'),
      );
      const plan = JSON.parse((await cli(['plan', '-f', 'ghost', '--json'])).stdout) as {
        resource_changes: { address: string; change: { action: string } }[];
      };
      expect(plan.resource_changes.map((c) => [c.address, c.change.action])).toEqual([['env.duo-preview', 'create']]);
    },
    patient(60_000),
  );
});
