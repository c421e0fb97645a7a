// Issue 11, end to end against the emulator over HTTP: several configurations in one environment,
// adoption, plan in one path and apply in another, two applies at once, environments that leave
// the configuration, and destroy. Each test asserts what must never happen: touching what is not
// ours, rotating adopted keys, issuing one key twice, losing a key.
import { existsSync, mkdirSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { startEmulator, type RunningEmulator } from '../../src/emulator/index.js';
import { SopsFileStore } from '../../src/secrets/index.js';
import { allOutput, RAW_KEY_PATTERN, runCli, workspace } from '../support/cli.js';

const API_KEY = 'sk_test_ownership0123456789';

/** One configuration of project `own` (environments production and, optionally, staging). */
const config = (o: {
  owner?: string;
  clients: string[];
  staging?: string[];
  extraKey?: string;
}) => `apiVersion: kms-sync/v1
${o.owner ? `owner: ${o.owner}` : ''}
projects:
  - slug: own
    name: Ownership
    environments:
      - type: production
        url: https://own.example
        templates: [{ name: std, rateLimitDay: 1000, maxClients: 100 }]
        clients:
${o.clients
  .map(
    (c) => `          - name: ${c}
            template: std
            keys:
              - { name: main }
${o.extraKey ? `              - { name: ${o.extraKey} }\n` : ''}`,
  )
  .join('')}${
  o.staging
    ? `      - type: staging
        url: https://staging.own.example
        templates: [{ name: std, rateLimitDay: 10, maxClients: 10 }]
        clients:
${o.staging
  .map(
    (c) => `          - name: ${c}
            template: std
            keys: [{ name: main }]
`,
  )
  .join('')}`
    : ''
}`;

let emu: RunningEmulator;
let dir: string;
let env: NodeJS.ProcessEnv;
const headers = { 'x-api-key': API_KEY, 'content-type': 'application/json' };
const api = async (method: string, p: string, body?: unknown) =>
  (await (
    await fetch(emu.url + p, { method, headers, ...(body !== undefined ? { body: JSON.stringify(body) } : {}) })
  ).json()) as any;
const clients = async (pe = 'own-production') =>
  ((await api('GET', `/client?project_env=${pe}&limit=100`)).data ?? []) as any[];
const write = (rel: string, text: string) => {
  mkdirSync(path.dirname(path.join(dir, rel)), { recursive: true });
  writeFileSync(path.join(dir, rel), text);
};
const cli = (args: string[], cwd = dir) => runCli(args, { env, cwd });
const planJson = async (folder: string, ...extra: string[]) => {
  const r = await cli(['plan', '-f', folder, '--json', ...extra]);
  expect(r.code, r.stderr).toBe(0);
  return JSON.parse(r.stdout) as {
    target: { owner: string };
    resource_changes: { address: string; change: { action: string; action_reason: string } }[];
    unmanaged: { address: string; note: string }[];
    warnings: string[];
  };
};
const validates = async (clientId: string, name: string, raw: string | undefined, pe = 'own-production') =>
  raw !== undefined &&
  (
    await api('POST', `/client/${clientId}?project_env=${pe}&method_path=GET:/x`, {
      name,
      headers: { 'x-api-key': raw },
    })
  ).success === true;

beforeAll(async () => {
  emu = await startEmulator({ port: 0, apiKeys: [API_KEY] });
});
beforeEach(async () => {
  // A fresh project for each scenario.
  await fetch(`${emu.url}/project/own-production?kind=project&forceDelete=true`, { method: 'DELETE', headers }).catch(
    () => undefined,
  );
  dir = workspace();
  env = {
    KMS_API_URL: emu.url,
    KMS_API_KEY: API_KEY,
    SOPS_AGE_KEY_FILE: path.join(dir, 'age', 'keys.txt'),
    KMS_SYNC_ALLOW_LOCAL_STORE: '1',
  };
});
afterAll(async () => {
  await emu?.close();
  for (const text of allOutput) expect(text).not.toMatch(RAW_KEY_PATTERN);
});

describe('ownership scopes', () => {
  it('two configurations share one environment, each deleting only what it owns', async () => {
    write('team-a/kms.yaml', config({ owner: 'team-a', clients: ['alpha'] }));
    write('team-b/kms.yaml', config({ owner: 'team-b', clients: ['bravo', 'bravo2'] }));
    expect((await cli(['apply', '-f', 'team-a', '--auto-approve'])).code).toBe(0);
    // B's plan creates its clients and leaves A's alone, saying whose it is.
    const b = await planJson('team-b');
    expect(b.target.owner).toBe('team-b');
    expect(b.resource_changes.map((c) => [c.address, c.change.action])).toEqual([
      ['client.own-production/bravo', 'create'],
      ['client.own-production/bravo2', 'create'],
    ]);
    expect(b.unmanaged).toEqual([
      expect.objectContaining({
        address: 'client.own-production/alpha',
        note: expect.stringContaining("owned by configuration 'team-a'"),
      }),
    ]);
    expect((await cli(['apply', '-f', 'team-b', '--auto-approve'])).code).toBe(0);
    // Even pruning, A never deletes B's clients; B removing one deletes only that one.
    expect((await planJson('team-a', '--prune')).resource_changes).toEqual([]);
    write('team-b/kms.yaml', config({ owner: 'team-b', clients: ['bravo'] }));
    expect((await planJson('team-b', '--prune')).resource_changes.map((c) => [c.address, c.change.action])).toEqual([
      ['client.own-production/bravo2', 'delete'],
    ]);
    expect((await cli(['apply', '-f', 'team-b', '--auto-approve', '--prune'])).code).toBe(0);
    expect((await clients()).map((c) => [c.name, c.metadata['kms-sync/owner']]).sort()).toEqual([
      ['alpha', 'team-a'],
      ['bravo', 'team-b'],
    ]);
  });

  it('claims a resource created before owners were recorded, and a configuration that does not name it keeps it', async () => {
    write('a/kms.yaml', config({ owner: 'team-a', clients: ['alpha'] }));
    expect((await cli(['apply', '-f', 'a', '--auto-approve'])).code).toBe(0);
    const tpl = (await api('GET', '/client/templates?project_env=own-production')).data[0];
    await api('POST', '/client?project_env=own-production', [
      { name: 'old', templateId: tpl.id, metadata: { 'managed-by': 'kms-sync' }, keys: [] },
    ]);
    const a = await planJson('a', '--prune');
    expect(a.resource_changes).toEqual([]);
    expect(a.unmanaged).toEqual([
      expect.objectContaining({
        address: 'client.own-production/old',
        note: expect.stringContaining('before owners were recorded'),
      }),
    ]);
    write('b/kms.yaml', config({ owner: 'team-b', clients: ['old'] }));
    const b = await cli(['plan', '-f', 'b', '--json']);
    const change = JSON.parse(b.stdout).resource_changes.find((c: any) => c.address === 'client.own-production/old');
    expect(change.change.action).toBe('update');
    expect(change.change.reason).toContain('claimed by this configuration');
  });

  it('adopting an existing setup (export, then plan) changes nothing and never rotates its keys', async () => {
    // Made by hand (no markers) and by another configuration: both are adopted as they are.
    write('a/kms.yaml', config({ owner: 'team-a', clients: ['alpha'] }));
    expect((await cli(['apply', '-f', 'a', '--auto-approve'])).code).toBe(0);
    const tpl = (await api('GET', '/client/templates?project_env=own-production')).data[0];
    await api('POST', '/client?project_env=own-production', [
      { name: 'by-hand', templateId: tpl.id, metadata: { team: 'x' }, keys: [{ name: 'k1' }, { name: 'k2' }] },
    ]);
    const before = (await clients()).flatMap((c) => c.keys.map((k: any) => k.id)).sort();
    expect((await cli(['export', '--env', 'own-production', '-o', 'adopted/kms.yaml'])).code).toBe(0);
    const plan = await cli(['plan', '-f', 'adopted', '--detailed-exitcode']);
    expect(plan.code, plan.stdout + plan.stderr).toBe(0);
    expect(plan.stdout).toContain("owned by configuration 'team-a'");
    const apply = await cli(['apply', '-f', 'adopted', '--auto-approve']);
    expect(apply.code).toBe(0);
    expect((await clients()).flatMap((c) => c.keys.map((k: any) => k.id)).sort()).toEqual(before);
    // A key of our own whose secret we do not hold (its store was replaced) is reported, not rotated.
    rmSync(path.join(dir, 'a', '.kms-sync', 'secrets.sops.yaml'));
    const ours = await cli(['plan', '-f', 'a', '--detailed-exitcode']);
    expect(ours.code, ours.stdout).toBe(0);
    expect(ours.stdout).toContain('secret not held');
  });

  it('a plan saved in one workspace path applies in another, writing keys to the store beside the configuration there', async () => {
    write('ws-a/config/kms.yaml', config({ owner: 'team-a', clients: ['alpha'] }));
    expect((await cli(['apply', '-f', 'config', '--auto-approve'], path.join(dir, 'ws-a'))).code).toBe(0);
    write('ws-a/config/kms.yaml', config({ owner: 'team-a', clients: ['alpha', 'gamma'] }));
    expect((await cli(['plan', '-f', 'config', '--out', 'plan.json'], path.join(dir, 'ws-a'))).code).toBe(0);
    // CI: the apply job runs in another workspace path (the checkout moved).
    renameSync(path.join(dir, 'ws-a'), path.join(dir, 'ws-b'));
    const r = await cli(['apply', 'plan.json'], path.join(dir, 'ws-b'));
    expect(r.code, r.stdout + r.stderr).toBe(0);
    expect(existsSync(path.join(dir, 'ws-a'))).toBe(false); // nothing re-created at the old path
    const gamma = (await clients()).find((c) => c.name === 'gamma');
    const raw = await new SopsFileStore(path.join(dir, 'ws-b', 'config', '.kms-sync', 'secrets.sops.yaml'), {
      env,
    }).read('own-production/gamma/main');
    expect(await validates(gamma.id, 'main', raw)).toBe(true);
    expect((await cli(['plan', '-f', 'config', '--detailed-exitcode'], path.join(dir, 'ws-b'))).code).toBe(0);
  });

  it('refuses a saved plan whose store file went missing, instead of creating an empty one', async () => {
    write('config/kms.yaml', config({ owner: 'team-a', clients: ['alpha'] }));
    expect((await cli(['apply', '-f', 'config', '--auto-approve'])).code).toBe(0);
    write('config/kms.yaml', config({ owner: 'team-a', clients: ['alpha', 'delta'] }));
    expect((await cli(['plan', '-f', 'config', '--out', 'plan.json'])).code).toBe(0);
    rmSync(path.join(dir, 'config', '.kms-sync', 'secrets.sops.yaml'));
    const r = await cli(['apply', 'plan.json']);
    expect(r.code).toBe(1);
    expect(r.stderr).toContain('existed when plan.json was made and is missing now');
    expect((await clients()).some((c) => c.name === 'delta')).toBe(false);
  });
});

describe('two applies at once', () => {
  it('the second fails before issuing anything (default), or waits with --lock-timeout; one key, stored', async () => {
    write('config/kms.yaml', config({ owner: 'team-a', clients: ['alpha'] }));
    expect((await cli(['apply', '-f', 'config', '--auto-approve'])).code).toBe(0);
    write('config/kms.yaml', config({ owner: 'team-a', clients: ['alpha'], extraKey: 'third' }));
    emu.addFault({ method: 'PUT', route: '/client/{client_uuid}', mode: 'delay', delayMs: 800, times: 2 });
    const [x, y] = await Promise.all([
      cli(['apply', '-f', 'config', '--auto-approve']),
      cli(['apply', '-f', 'config', '--auto-approve']),
    ]);
    expect([x.code, y.code].sort()).toEqual([0, 1]);
    expect((x.code === 1 ? x : y).stderr).toMatch(/lock/);
    expect((await clients()).find((c) => c.name === 'alpha').keys.filter((k: any) => k.name === 'third')).toHaveLength(
      1,
    );
    // Serialized with a lock timeout: both succeed, the second finds nothing to do.
    write('config/kms.yaml', config({ owner: 'team-a', clients: ['alpha'], extraKey: 'fourth' }));
    emu.addFault({ method: 'PUT', route: '/client/{client_uuid}', mode: 'delay', delayMs: 800, times: 2 });
    const [p, q] = await Promise.all([
      cli(['apply', '-f', 'config', '--auto-approve', '--lock-timeout', '30s']),
      cli(['apply', '-f', 'config', '--auto-approve', '--lock-timeout', '30s']),
    ]);
    expect([p.code, q.code], p.stderr + q.stderr).toEqual([0, 0]);
    const alpha = (await clients()).find((c) => c.name === 'alpha');
    expect(alpha.keys.filter((k: any) => k.name === 'fourth')).toHaveLength(1);
    const store = new SopsFileStore(path.join(dir, 'config', '.kms-sync', 'secrets.sops.yaml'), { env });
    expect(await validates(alpha.id, 'fourth', await store.read('own-production/alpha/fourth'))).toBe(true);
    // The lock records are gone and never show in a plan.
    expect(
      (await api('GET', '/endpoint?project_env=own-production')).data.filter((e: any) =>
        e.path.startsWith('/__kms-sync/lock/'),
      ),
    ).toEqual([]);
  });
});

describe('environments that leave the configuration, and destroy', () => {
  it('deletes an environment removed from the configuration with what it holds, when all of it is ours', async () => {
    write('config/kms.yaml', config({ owner: 'team-a', clients: ['alpha'], staging: ['s1', 's2'] }));
    expect((await cli(['apply', '-f', 'config', '--auto-approve'])).code).toBe(0);
    write('config/kms.yaml', config({ owner: 'team-a', clients: ['alpha'] }));
    const plan = await planJson('config');
    expect(plan.resource_changes.map((c) => [c.address, c.change.action])).toEqual([
      ['client.own-staging/s1', 'delete'],
      ['client.own-staging/s2', 'delete'],
      ['env.own-staging', 'delete'],
    ]);
    const r = await cli(['apply', '-f', 'config', '--auto-approve']);
    expect(r.code, r.stdout + r.stderr).toBe(0);
    const project = await api('GET', '/project/own-production');
    expect(project.envs.list.map((e: any) => e.project_env)).toEqual(['own-production']);
  });

  it("keeps an environment that holds another configuration's resources, saying why", async () => {
    write('config/kms.yaml', config({ owner: 'team-a', clients: ['alpha'], staging: ['s1'] }));
    expect((await cli(['apply', '-f', 'config', '--auto-approve'])).code).toBe(0);
    const tpl = (await api('GET', '/client/templates?project_env=own-staging')).data[0];
    await api('POST', '/client?project_env=own-staging', [
      {
        name: 'theirs',
        templateId: tpl.id,
        metadata: { 'managed-by': 'kms-sync', 'kms-sync/owner': 'team-b' },
        keys: [],
      },
    ]);
    write('config/kms.yaml', config({ owner: 'team-a', clients: ['alpha'] }));
    const plan = await planJson('config', '--prune');
    expect(plan.resource_changes.map((c) => [c.address, c.change.action])).toEqual([
      ['client.own-staging/s1', 'delete'],
    ]);
    expect(plan.warnings.join('\n')).toContain(
      "env.own-staging: left the configuration, but it is kept: client.own-staging/theirs is owned by configuration 'team-b'",
    );
  });

  it('destroy deletes what the configuration owns, and the project once nothing else is in it', async () => {
    write('config/kms.yaml', config({ owner: 'team-a', clients: ['alpha', 'beta'], staging: ['s1'] }));
    const created = await cli(['apply', '-f', 'config', '--auto-approve']);
    expect(created.code).toBe(0);
    // Completion lines in dependency order: the project before its environments and templates.
    const done = created.stderr
      .split('\n')
      .filter((l) => l.endsWith('create complete'))
      .map((l) => l.split(':')[0]);
    expect(done.slice(0, 3)).toEqual(['project.own', 'env.own-production', 'env.own-staging']);
    const refused = await cli(['destroy', '-f', 'config']);
    expect(refused.code).toBe(1); // no terminal to confirm on
    expect((await clients()).length).toBe(2);
    const r = await cli(['destroy', '-f', 'config', '--auto-approve']);
    expect(r.code, r.stdout + r.stderr).toBe(0);
    expect(r.stdout).toContain('project.own');
    // Terraform's closing words for a destroy.
    expect(r.stdout).toContain('Destroy complete! Resources: 4 destroyed.');
    expect(r.stdout).not.toContain('Apply complete!');
    const list = (await api('GET', '/project')).data.map((p: any) => p.slug);
    expect(list).not.toContain('own');
  });

  it("destroy's reasons do not contradict each other when an environment is kept", async () => {
    write('config/kms.yaml', config({ owner: 'team-a', clients: ['alpha'], staging: ['s1'] }));
    expect((await cli(['apply', '-f', 'config', '--auto-approve'])).code).toBe(0);
    const tpl = (await api('GET', '/client/templates?project_env=own-staging')).data[0];
    await api('POST', '/client?project_env=own-staging', [
      {
        name: 'theirs',
        templateId: tpl.id,
        metadata: { 'managed-by': 'kms-sync', 'kms-sync/owner': 'team-b' },
        keys: [],
      },
    ]);
    const r = await cli(['destroy', '-f', 'config']);
    expect(r.code).toBe(1); // no terminal to confirm on: the plan only
    expect(r.stdout).toContain(
      '# client.own-staging/s1 will be destroyed (this configuration is destroyed; its environment is kept',
    );
    expect(r.stdout).not.toMatch(/client\.own-staging\/s1 will be destroyed \(its environment is destroyed\)/);
    expect(r.stdout).toContain('# client.own-production/alpha will be destroyed (its environment is destroyed)');
    expect(r.stdout).toContain(
      "env.own-staging: kept, not destroyed: client.own-staging/theirs is owned by configuration 'team-b'",
    );
    expect(r.stdout).not.toContain('is destroyed, but it is kept');
  });
});

describe('drift tells pending changes from changes made outside', () => {
  const drift = async (folder: string) => {
    const r = await cli(['drift', '-f', folder, '--format', 'json', '--no-usage']);
    expect([0, 2]).toContain(r.code);
    return JSON.parse(r.stdout) as { items: { category: string; address: string }[] };
  };
  it("an unapplied edit is pending, an edit behind kms-sync's back is changed outside", async () => {
    const withMeta = (team: string) =>
      config({ owner: 'team-a', clients: ['alpha'] }).replace(
        '            template: std\n',
        `            template: std\n            metadata: { team: ${team} }\n`,
      );
    write('config/kms.yaml', withMeta('payments'));
    expect((await cli(['apply', '-f', 'config', '--auto-approve'])).code).toBe(0);
    // The configuration changes and is not applied: pending, not "changed outside".
    write('config/kms.yaml', withMeta('growth'));
    expect((await drift('config')).items.map((i) => [i.category, i.address])).toEqual([
      ['pending', 'client.own-production/alpha'],
    ]);
    expect((await cli(['apply', '-f', 'config', '--auto-approve'])).code).toBe(0);
    // Someone edits the live client: changed outside.
    const alpha = (await clients()).find((c) => c.name === 'alpha');
    await api('PUT', `/client/${alpha.id}?project_env=own-production`, {
      metadata: { ...alpha.metadata, team: 'by-hand' },
    });
    expect((await drift('config')).items.map((i) => [i.category, i.address])).toEqual([
      ['changed_outside', 'client.own-production/alpha'],
    ]);
    // Both at once: reported under both.
    write('config/kms.yaml', withMeta('security'));
    expect((await drift('config')).items.map((i) => i.category).sort()).toEqual(['changed_outside', 'pending']);
  });

  it('plan --prune never deletes what .kmsignore ignores, and says so', async () => {
    write('config/kms.yaml', config({ owner: 'team-a', clients: ['alpha'] }));
    expect((await cli(['apply', '-f', 'config', '--auto-approve'])).code).toBe(0);
    const tpl = (await api('GET', '/client/templates?project_env=own-production')).data[0];
    await api('POST', '/client?project_env=own-production', [
      { name: 'by-hand', templateId: tpl.id, keys: [] },
      { name: 'other-hand', templateId: tpl.id, keys: [] },
    ]);
    // Beside the configuration (issue 39), whatever folder the command runs from.
    write('config/.kmsignore', 'client.own-production/by-hand\n');
    const plan = await planJson('config', '--prune');
    expect(plan.resource_changes.map((c) => [c.address, c.change.action])).toEqual([
      ['client.own-production/other-hand', 'delete'],
    ]);
    expect(plan.unmanaged).toEqual([
      expect.objectContaining({
        address: 'client.own-production/by-hand',
        note: expect.stringContaining(`ignored by ${path.join('config', '.kmsignore')}:1`),
      }),
    ]);
    expect((await cli(['apply', '-f', 'config', '--auto-approve', '--prune'])).code).toBe(0);
    expect((await clients()).map((c) => c.name).sort()).toEqual(['alpha', 'by-hand']);
  });
});
