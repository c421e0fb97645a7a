// The agent's inventory and its record of heals (issue 36), against the built agent, git and the
// emulator: a metadata PUT that replaces the map (as dashboards do) strips a client's ownership
// markers; the inventory (STATE/inventory.json, in /api/status and on the page) still says it is
// ours, so it is reported as drift ("ownership marker removed"), self-heal restores the markers
// (one heal on record, kept across restarts, one notification), and offboarding it with --prune
// revokes its key. Deletes approved through the API survive a restart and are used once. Keys
// waiting in the journal (the store's lock held by a live process) make the agent Degraded
// (Ready=False, result `degraded`, commit status `error`), not successful. Edits of a template the
// configuration has not applied yet are "pending", not "changed outside" (issue 39 item 4).
import { existsSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { printedSecrets, Trace, waitFor } from '../crash/lib.js';
import {
  agentConfig,
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
const OWNER = 'agent-test-agent';

async function stop(a: AgentProc) {
  a.child.kill('SIGTERM');
  return a.exit;
}

/** A stand-in for the Slack webhook and GitHub's statuses API: every request body, by path. */
async function receiver(): Promise<{
  url: string;
  seen: { path: string; body: string }[];
  close: () => Promise<void>;
}> {
  const seen: { path: string; body: string }[] = [];
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      seen.push({ path: req.url ?? '', body: Buffer.concat(chunks).toString('utf8') });
      res.writeHead(201, { 'content-type': 'application/json' });
      res.end('{}');
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    seen,
    close: () => new Promise((r) => server.close(() => r())),
  };
}

describe('the agent keeps an inventory, a record of every heal, approvals and an honest condition', () => {
  let f: Fixture;
  let hook: Awaited<ReturnType<typeof receiver>>;
  const notes = () =>
    hook.seen.filter((s) => s.path.startsWith('/slack')).map((s) => JSON.parse(s.body).text as string);
  const client = async (name: string) => (await f.emu.clients(ENV)).find((c) => c.name === name) as any;
  const clients: ClientSpec[] = [
    { name: 'alpha', keys: ['primary'] },
    { name: 'beta', keys: ['primary'], ip: '' },
    { name: 'gamma', keys: ['primary'] },
  ];
  beforeAll(async () => {
    f = await fixture();
    hook = await receiver();
  });
  // An agent a failed test left running would hold the state folder for the next test.
  afterEach(async () => {
    for (const p of f.procs) if (p.child.exitCode === null && p.child.signalCode === null) p.child.kill('SIGTERM');
    await Promise.all(f.procs.map((p) => p.exit));
  });
  afterAll(async () => {
    expect(printedSecrets(f.outputs)).toEqual([]);
    await hook.close();
    await f.cleanup();
  });

  it(
    'a stripped ownership marker is drift, self-heal restores it (one heal on record and one notification), and offboarding revokes its key',
    async () => {
      const first = f.repo.push({ [CONFIG]: agentConfig(clients) }, 'three clients');
      const env = { KMS_SYNC_NOTIFY_WEBHOOK: `${hook.url}/slack/T0/B0/x` };
      const sync = await startAgent(f, ['--path', 'kms', '--interval', '1s', '--mode', 'sync'], env);
      let s = await until(
        sync,
        'the first commit synced',
        (x) => x.revision.synced === first && x.inventory?.byKind?.client === 3,
      );
      expect(s.inventory.entries.map((e: any) => e.address)).toEqual(
        expect.arrayContaining([
          'client.agent-production/alpha',
          'endpoint.agent-production/GET:/v1/orders',
          'template.agent-production/std',
        ]),
      );
      const kept = JSON.parse(readFileSync(path.join(f.stateDir, 'inventory.json'), 'utf8'));
      expect(kept.owner).toBe(OWNER);
      expect(kept.entries.find((e: any) => e.address === 'client.agent-production/alpha').id).toBe(
        (await client('alpha')).id,
      );
      expect((await sync.get('/')).text).toMatch(/id="inventory-count">\d+ resource\(s\) owned/);
      // The service's copy too (engine/inventory.ts), as the CLI's apply keeps it: one record holding alpha.
      const records = async () =>
        ((await f.emu.call('GET', `/endpoint?project_env=${ENV}&limit=100`)) as any).data.filter((e: any) =>
          e.path.startsWith('/__kms-sync/inventory/'),
        );
      expect(await waitFor(async () => (await records()).length === 1, 20_000)).toBe(true);
      expect((await records())[0].metadata).toMatchObject({ owner: OWNER, 'kms-sync/record': 'inventory' });

      // A dashboard replaces alpha's metadata map: the markers are gone.
      const alpha = await client('alpha');
      await f.emu.call('PUT', `/client/${alpha.id}?project_env=${ENV}`, { metadata: { team: 'payments' } });
      expect((await client('alpha')).metadata).toEqual({ team: 'payments' });
      s = await until(sync, 'the stripped marker reported as drift', (x) =>
        x.drift.some((d: any) => d.address === 'client.agent-production/alpha'),
      );
      const item = s.drift.find((d: any) => d.address === 'client.agent-production/alpha');
      expect(item).toMatchObject({ category: 'changed_outside', action: 'update' });
      expect(item.detail).toMatch(/ownership marker removed outside kms-sync/);
      // Sync mode reports it and leaves it; the inventory still holds it.
      expect(s.inventory.byKind.client).toBe(3);
      expect((await client('alpha')).metadata).toEqual({ team: 'payments' });
      expect(await stop(sync)).toBe(0);

      const heal = await startAgent(f, ['--path', 'kms', '--interval', '1s', '--mode', 'self-heal'], env);
      s = await until(heal, 'the markers restored', (x) => x.heals.length >= 1 && x.drift.length === 0);
      expect((await client('alpha')).metadata).toMatchObject({
        'managed-by': 'kms-sync',
        'kms-sync/owner': OWNER,
        team: 'payments',
      });
      expect(s.heals[0]).toMatchObject({
        address: 'client.agent-production/alpha',
        action: 'update',
        revision: first,
        count: 1,
      });
      expect(s.heals[0].reason).toMatch(/ownership marker removed/);
      expect(s.heals[0].fields.map((x: any) => x.path)).toContain('metadata.managed-by');
      expect(s.timeline.filter((t: any) => t.kind === 'healed').map((t: any) => t.address)).toEqual([
        'client.agent-production/alpha',
      ]);
      // Someone opens beta to the world: healed too, with the field on record.
      const beta = await client('beta');
      await f.emu.call('PUT', `/client/${beta.id}?project_env=${ENV}`, { ipWhitelist: ['0.0.0.0/0'] });
      expect((await heal.post('/api/reconcile', '{}', JSON_BODY)).status).toBe(202);
      s = await until(heal, 'beta healed', (x) =>
        x.heals.some((h: any) => h.address === 'client.agent-production/beta'),
      );
      expect(s.heals[0].fields).toEqual([{ path: 'ipWhitelist', before: ['0.0.0.0/0'], after: [] }]);
      const reconciles = s.reconciles;
      await until(heal, 'two more reconciles', (x) => x.reconciles >= reconciles + 2);
      // One notification per heal, none for the reconciles that healed nothing.
      expect(notes().filter((n) => /healed `client\.agent-production\/alpha`/.test(n))).toHaveLength(1);
      expect(
        notes().filter((n) => /healed `client\.agent-production\/beta`: ipWhitelist changed/.test(n)),
      ).toHaveLength(1);
      expect(await heal.metrics()).toMatch(/^kms_sync_heals_total\{kind="client"\} 2$/m);
      expect(await stop(heal)).toBe(0);

      // The record survives a restart (and is not notified again); the page shows it.
      const again = await startAgent(f, ['--path', 'kms', '--interval', '1s', '--mode', 'sync', '--prune'], env);
      s = await again.status();
      expect(s.heals.map((h: any) => h.address)).toEqual([
        'client.agent-production/beta',
        'client.agent-production/alpha',
      ]);
      expect((await again.get('/')).text).toMatch(/<table id="heals">[\s\S]*client\.agent-production\/alpha/);

      // Offboarding alpha after its markers were stripped again: --prune deletes it (its key revoked).
      await f.emu.call('PUT', `/client/${alpha.id}?project_env=${ENV}`, { metadata: {} });
      const keyBefore = (await f.emu.liveKeys(ENV)).filter((k) => k.client === 'alpha');
      expect(keyBefore).toHaveLength(1);
      const offboard = f.repo.push(
        { [CONFIG]: agentConfig(clients.filter((c) => c.name !== 'alpha')) },
        'offboard alpha',
      );
      s = await until(again, 'alpha offboarded', (x) => x.revision.synced === offboard);
      expect(await client('alpha')).toBeUndefined();
      expect((await f.emu.liveKeys(ENV)).filter((k) => k.client === 'alpha')).toEqual([]);
      const deleted = /applied delete client\.agent-production\/alpha /;
      expect(await logged(again, deleted)).toMatch(deleted);
      await until(again, 'alpha out of the inventory', (x) => x.inventory.byKind.client === 2);
      expect(notes().filter((n) => /healed/.test(n))).toHaveLength(2);
      expect(await stop(again)).toBe(0);
    },
    patient(120_000),
  );

  it(
    'deletes approved through the API survive a restart, and are used once',
    async () => {
      const approvals = path.join(f.stateDir, 'approved-deletes.json');
      const base = [
        { name: 'beta', keys: ['primary'] },
        { name: 'gamma', keys: ['primary'] },
        { name: 'delta', keys: ['primary'] },
      ];
      const three = f.repo.push({ [CONFIG]: agentConfig(base) }, 'beta, gamma, delta');
      const args = ['--path', 'kms', '--interval', '1s', '--mode', 'sync', '--prune', '--max-deletes', '1'];
      const agent = await startAgent(f, args);
      await until(agent, 'three synced', (x) => x.revision.synced === three);
      const shrink = f.repo.push({ [CONFIG]: agentConfig([base[0]!]) }, 'keep beta only');
      await until(agent, 'the deletes held', (x) => x.heldDeletes?.revision === shrink);
      // Approved while suspended, then the agent stops before it reconciles.
      expect((await agent.post('/api/suspend', '{}', JSON_BODY)).status).toBe(200);
      expect((await agent.post('/api/approve-deletes', JSON.stringify({ revision: shrink }), JSON_BODY)).status).toBe(
        202,
      );
      expect(JSON.parse(readFileSync(approvals, 'utf8'))).toEqual([
        expect.objectContaining({
          revision: shrink,
          addresses: ['client.agent-production/delta', 'client.agent-production/gamma'],
        }),
      ]);
      expect(await stop(agent)).toBe(0);

      const restarted = await startAgent(f, args);
      expect((await restarted.post('/api/resume', '{}', JSON_BODY)).status).toBe(200);
      await until(
        restarted,
        'the approved deletes applied after the restart',
        (x) => x.revision.synced === shrink && !x.heldDeletes,
      );
      expect((await f.emu.clients(ENV)).map((c) => c.name)).toEqual(['beta']);
      // Used up: nothing left to replay.
      expect(JSON.parse(readFileSync(approvals, 'utf8'))).toEqual([]);
      expect(await stop(restarted)).toBe(0);
    },
    patient(120_000),
  );

  it(
    'keys waiting in the journal make it Degraded (condition, metrics, commit status), until they are stored',
    async () => {
      const store = path.join(f.stateDir, 'store', '.kms-sync', 'secrets.sops.yaml');
      const journal = path.join(f.stateDir, 'store', '.kms-sync', 'journal');
      const trace = path.join(f.root, 'trace.txt');
      // An agent killed between the journal and the store leaves the key of epsilon in the journal.
      const rev = f.repo.push(
        {
          [CONFIG]: agentConfig([
            { name: 'beta', keys: ['primary'] },
            { name: 'epsilon', keys: ['primary'] },
          ]),
        },
        'add epsilon',
      );
      const t = new Trace(trace);
      t.mark();
      const victim = await startAgent(f, ['--path', 'kms', '--interval', '1h', '--mode', 'sync'], {
        KMS_SYNC_TEST_TRACE: trace,
        KMS_SYNC_TEST_PAUSE: 'store-locked:5000',
      });
      expect(
        await t.waitFor(['store-locked'], 30_000, () => victim.child.exitCode !== null),
        victim.output().slice(-3000),
      ).toBe('store-locked');
      victim.child.kill('SIGKILL');
      await victim.exit;
      expect(statSync(journal).size).toBeGreaterThan(0);
      // Then a live process (this one) holds the store's lock: the agent cannot break it, and its flush times out.
      writeFileSync(
        `${store}.lock`,
        JSON.stringify({ pid: process.pid, host: os.hostname(), createdAt: new Date().toISOString() }),
      );
      const agent = await startAgent(
        f,
        [
          '--path',
          'kms',
          '--interval',
          '1s',
          '--mode',
          'sync',
          '--commit-status',
          'github',
          '--status-repo',
          'acme/kms',
        ],
        {
          GITHUB_TOKEN: 'ghp_inventorytesttoken0000000000000000',
          GITHUB_API_URL: `${hook.url}/github`,
        },
      );
      try {
        const s = await until(agent, 'a degraded reconcile', (x) => x.lastReconcile !== undefined, 90_000);
        expect(s.lastReconcile.result, JSON.stringify(s.lastReconcile)).toBe('degraded');
        expect(s.condition).toMatchObject({ status: 'False', reason: 'KeysWaitInJournal' });
        expect(s.journalKeysWaiting).toBe(1);
        expect(s.lastReconcile.errors[0]).toMatch(
          /1 key\(s\) wait in the journal for their secret store: .*stay in the journal/,
        );
        const metrics = await agent.metrics();
        expect(metrics).toMatch(/^kms_sync_reconcile_condition\{type="Ready",status="False"\} 1$/m);
        expect(metrics).toMatch(/^kms_sync_journal_keys_waiting 1$/m);
        expect(metrics).toMatch(/^kms_sync_reconcile_total\{result="degraded"\} [1-9]/m);
        expect(metrics).not.toMatch(/^kms_sync_reconcile_total\{result="success"\}/m);
        expect((await agent.get('/')).text).toContain('id="journal-waiting"');
        const statuses = () =>
          hook.seen.filter((x) => x.path === `/github/repos/acme/kms/statuses/${rev}`).map((x) => JSON.parse(x.body));
        expect(
          await waitFor(() => statuses().some((b) => b.state === 'error' && /^degraded: /.test(b.description)), 20_000),
        ).toBe(true);
        expect(statuses().some((b) => b.state === 'success')).toBe(false);

        rmSync(`${store}.lock`);
        const ok = await until(agent, 'the keys stored', (x) => x.lastReconcile?.result === 'success', 60_000);
        expect(ok.condition.status).toBe('True');
        expect(ok.journalKeysWaiting).toBe(0);
        expect(existsSync(journal) ? statSync(journal).size : 0).toBe(0);
        expect(await waitFor(() => statuses().some((b) => b.state === 'success'), 20_000)).toBe(true);
      } finally {
        rmSync(`${store}.lock`, { force: true });
        expect(await stop(agent)).toBe(0);
      }
    },
    patient(180_000),
  );

  it(
    'detect: a template edit not applied yet is pending, a change made outside is changed outside (issue 39 item 4)',
    async () => {
      const edited = agentConfig([
        { name: 'beta', keys: ['primary'] },
        { name: 'epsilon', keys: ['primary'] },
      ]).replace('rateLimitDay: 100000', 'rateLimitDay: 5000');
      const rev = f.repo.push({ [CONFIG]: edited }, 'lower the rate limit');
      const agent = await startAgent(f, ['--path', 'kms', '--interval', '1s', '--mode', 'detect']);
      let s = await until(
        agent,
        'the edit reported',
        (x) =>
          x.lastReconcile?.revision === rev && x.drift.some((d: any) => d.address === 'template.agent-production/std'),
      );
      expect(
        s.drift.filter((d: any) => d.address === 'template.agent-production/std').map((d: any) => d.category),
      ).toEqual(['pending']);
      // Someone changes the live template too: now it moved outside as well.
      await f.emu.call('PUT', `/project/${ENV}`, { singleEnv: { templates: [{ name: 'std', rateLimitDay: 777 }] } });
      s = await until(
        agent,
        'the outside change reported',
        (x) => x.drift.filter((d: any) => d.address === 'template.agent-production/std').length === 2,
      );
      expect(
        s.drift
          .filter((d: any) => d.address === 'template.agent-production/std')
          .map((d: any) => d.category)
          .sort(),
      ).toEqual(['changed_outside', 'pending']);
      expect(await stop(agent)).toBe(0);
    },
    patient(90_000),
  );
});
