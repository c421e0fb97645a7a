// Flux's prune contract and the deletion guard (issue 36), against the built agent and CLI, git
// and the emulator. Without --prune the agent deletes nothing: clients that left the
// configuration stay live with their keys and are reported as "requires pruning" (status, page,
// metrics). With --prune it deletes them. A commit that would delete more than --max-deletes is
// applied without its deletes (a client it adds is created) and held until approved through the
// API, or by a "kms-sync: approve-deletes" line in its commit message. The CLI keeps Terraform's
// semantics (removal deletes) with the same guard: --max-deletes.
import { mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { kmsSync, printedSecrets } from '../crash/lib.js';
import {
  agentConfig,
  API_KEY,
  fixture,
  logged,
  JSON_BODY,
  startAgent,
  until,
  type AgentProc,
  type ClientSpec,
  type Fixture,
} from './lib.js';
import { patient } from '../support/patience.js';

const ENV = 'agent-production';
const CONFIG = 'kms/kms-sync.yaml';
const names = async (f: Fixture) => (await f.emu.clients(ENV)).map((c) => c.name).sort();
const gauge = (text: string, name: string) => Number(new RegExp(`^${name} (\\d+)`, 'm').exec(text)?.[1]);

async function stop(a: AgentProc) {
  a.child.kill('SIGTERM');
  return a.exit;
}

describe("the agent follows Flux's prune contract, and the deletion guard holds mass deletes", () => {
  let f: Fixture;
  const clients = (n: number, from = 0): ClientSpec[] =>
    Array.from({ length: n }, (_, i) => ({ name: `c${String(from + i).padStart(2, '0')}`, keys: ['primary'] }));
  beforeAll(async () => {
    f = await fixture();
  });
  afterAll(async () => {
    expect(printedSecrets(f.outputs)).toEqual([]);
    await f.cleanup();
  });

  it(
    'without --prune: what left the configuration is kept and reported as requiring pruning; with --prune it is deleted',
    async () => {
      const first = f.repo.push({ [CONFIG]: agentConfig(clients(14)) }, 'fourteen clients');
      const agent = await startAgent(f, ['--path', 'kms', '--interval', '1s', '--mode', 'sync']);
      await until(agent, 'the first commit applied', (x) => x.revision.synced === first);
      expect((await names(f)).length).toBe(14);
      // Every applied operation is logged with its address.
      const created = /applied create client\.agent-production\/c13 .*reason=create_missing/;
      expect(await logged(agent, created)).toMatch(created);
      const removed = f.repo.push({ [CONFIG]: agentConfig(clients(11)) }, 'remove three');
      const s = await until(
        agent,
        'the removal reconciled',
        (x) => x.revision.synced === removed && x.lastReconcile.result === 'success',
      );
      expect((await names(f)).length).toBe(14); // nothing deleted
      expect(s.requiresPruning.map((d: any) => d.address).sort()).toEqual([
        'client.agent-production/c11',
        'client.agent-production/c12',
        'client.agent-production/c13',
      ]);
      expect(gauge(await agent.metrics(), 'kms_sync_requires_pruning')).toBe(3);
      const page = (await agent.get('/')).text;
      expect(page).toContain('Requires pruning');
      expect(page).toContain('client.agent-production/c12');
      expect(await stop(agent)).toBe(0);

      const pruning = await startAgent(f, ['--path', 'kms', '--interval', '1s', '--mode', 'sync', '--prune']);
      await until(
        pruning,
        'the pruning reconcile',
        (x) => x.reconciles > 0 && x.lastReconcile.result === 'success' && (x.requiresPruning ?? []).length === 0,
      );
      expect(await names(f)).toEqual(clients(11).map((c) => c.name));
      expect(await stop(pruning)).toBe(0);
    },
    patient(90_000),
  );

  it(
    'with --prune, a commit that would delete more than --max-deletes is applied without its deletes and held until approved through the API',
    async () => {
      const agent = await startAgent(f, [
        '--path',
        'kms',
        '--interval',
        '1s',
        '--mode',
        'sync',
        '--prune',
        '--max-deletes',
        '10',
      ]);
      await until(agent, 'a first reconcile', (x) => x.reconciles > 0);
      // git rm of most of the configuration, and one new client.
      const mass = f.repo.push(
        { [CONFIG]: agentConfig([...clients(0), { name: 'newcomer', keys: ['primary'] }]) },
        'remove eleven, add one',
      );
      const held = await until(
        agent,
        'the deletes held',
        (x) => x.heldDeletes?.revision === mass && x.lastReconcile.revision === mass,
      );
      expect(held.heldDeletes.operations.length).toBe(11);
      expect(held.heldDeletes.reason).toMatch(/11 deletes or revokes exceed the deletion guard \(at most 10/);
      expect(held.revision.synced).not.toBe(mass);
      const live = await names(f);
      expect(live).toContain('newcomer'); // applied without its deletes
      expect(live.length).toBe(12);
      expect(gauge(await agent.metrics(), 'kms_sync_deletes_held')).toBe(11);
      expect((await agent.get('/')).text).toContain('Deletes held');
      // Approving another revision is refused; this one's deletes then run.
      expect(
        (await agent.post('/api/approve-deletes', JSON.stringify({ revision: '0'.repeat(40) }), JSON_BODY)).status,
      ).toBe(409);
      expect((await agent.post('/api/approve-deletes', JSON.stringify({ revision: mass }), JSON_BODY)).status).toBe(
        202,
      );
      await until(agent, 'the approved deletes applied', (x) => x.revision.synced === mass && !x.heldDeletes);
      expect(await names(f)).toEqual(['newcomer']);
      expect(await stop(agent)).toBe(0);
    },
    patient(90_000),
  );

  it(
    'a "kms-sync: approve-deletes" line in the commit message approves its deletes',
    async () => {
      const back = f.repo.push({ [CONFIG]: agentConfig(clients(12)) }, 'twelve again');
      const agent = await startAgent(f, [
        '--path',
        'kms',
        '--interval',
        '1s',
        '--mode',
        'sync',
        '--prune',
        '--max-deletes',
        '3',
      ]);
      await until(agent, 'twelve synced', (x) => x.revision.synced === back);
      const approved = f.repo.push({ [CONFIG]: agentConfig(clients(2)) }, 'shrink to two\n\nkms-sync: approve-deletes');
      await until(agent, 'the approved commit synced', (x) => x.revision.synced === approved);
      expect(await names(f)).toEqual(['c00', 'c01']);
      expect(await stop(agent)).toBe(0);
    },
    patient(90_000),
  );

  it(
    'the CLI deletes what left the configuration (Terraform), but holds more than --max-deletes: the rest is applied, exit 1, until run again with a higher limit',
    async () => {
      const dir = path.join(f.root, 'cli');
      mkdirSync(dir, { recursive: true });
      const env = {
        PATH: process.env.PATH,
        HOME: f.root,
        NO_COLOR: '1',
        KMS_API_URL: f.emu.url,
        KMS_API_KEY: API_KEY,
        SOPS_AGE_KEY_FILE: path.join(f.root, 'cli-age.txt'),
      };
      const run = async (args: string[]) => {
        const p = kmsSync(args, { cwd: dir, env, sink: f.outputs });
        return { code: await p.exit, out: p.output() };
      };
      const cfg = (cs: ClientSpec[]) =>
        writeFileSync(
          path.join(dir, 'kms-sync.yaml'),
          agentConfig(cs)
            .replace('owner: agent-test-agent', 'owner: cli-guard-test')
            .replace(/slug: agent/, 'slug: cliguard')
            .replace(/api\.agent\./, 'api.cliguard.'),
        );
      const cliNames = async () => (await f.emu.clients('cliguard-production')).map((c) => c.name).sort();
      cfg(clients(13));
      expect((await run(['apply', '--auto-approve'])).code).toBe(0);
      cfg([...clients(1), { name: 'extra', keys: ['primary'] }]);
      const plan = await run(['plan']);
      expect(plan.out).toMatch(/apply will hold the 12 deletes of this plan/);
      const held = await run(['apply', '--auto-approve']);
      expect(held.code, held.out).toBe(1);
      expect(held.out).toMatch(/Deletes held: 12 deletes or revokes exceed the deletion guard \(at most 10 at once\)/);
      expect(await cliNames()).toEqual([...clients(13).map((c) => c.name), 'extra'].sort());
      const done = await run(['apply', '--auto-approve', '--max-deletes', '12']);
      expect(done.code, done.out).toBe(0);
      expect(await cliNames()).toEqual(['c00', 'extra']);
    },
    patient(90_000),
  );
});
