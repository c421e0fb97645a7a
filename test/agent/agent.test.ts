// kms-sync agent as a real process (issue 29) against a bare git repository on disk that the test
// pushes to and the emulator: detect reports without writing; sync applies the first commit and a
// pushed one by itself, reports hand-made drift in /metrics and /api/status without healing it,
// never applies an invalid commit (reported with file:line); self-heal heals; signed webhooks
// reconcile at once and bad ones get 401; suspend/resume; SIGTERM during a reconcile exits 0
// within 10 s with every raw key it issued held (the crash campaign's invariant).
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { checkInvariant, printedSecrets, readSopsStore, waitFor } from '../crash/lib.js';
import {
  agentConfig,
  fixture,
  logged,
  JSON_BODY,
  githubSignature,
  GITLAB_TOKEN,
  startAgent,
  until,
  type AgentProc,
  type Fixture,
} from './lib.js';
import { patient } from '../support/patience.js';

const ENV = 'agent-production';
const CONFIG = 'config/kms-sync.yaml';
const storeFile = (f: Fixture) => path.join(f.stateDir, 'store', '.kms-sync', 'secrets.sops.yaml');
const ageKey = (f: Fixture) => path.join(f.stateDir, 'age', 'keys.txt');
const metric = (text: string, name: string, labels: Record<string, string>) => {
  const line = text
    .split('\n')
    .find((l) => l.startsWith(`${name}{`) && Object.entries(labels).every(([k, v]) => l.includes(`${k}="${v}"`)));
  return line === undefined ? undefined : Number(line.slice(line.lastIndexOf(' ') + 1));
};

async function stop(agent: AgentProc): Promise<{ code: number | null; ms: number }> {
  const t0 = Date.now();
  agent.child.kill('SIGTERM');
  const code = await agent.exit;
  return { code, ms: Date.now() - t0 };
}

async function clientByName(f: Fixture, name: string) {
  return (await f.emu.clients(ENV)).find((c) => c.name === name);
}

describe('kms-sync agent', () => {
  let f: Fixture;
  let revs: string[];
  beforeAll(async () => {
    f = await fixture();
    revs = [f.repo.push({ [CONFIG]: agentConfig([{ name: 'alpha', keys: ['primary'], ip: '' }]) }, 'first')];
  });
  afterAll(async () => {
    expect(printedSecrets(f.outputs)).toEqual([]);
    await f.cleanup();
  });

  it('detect: reports what is missing and writes nothing', async () => {
    const agent = await startAgent(f, ['--path', 'config', '--interval', '1s', '--mode', 'detect']);
    const s = await until(agent, 'a detect reconcile', (x) => x.lastReconcile?.result === 'success');
    expect(s.revision.fetched).toBe(revs[0]);
    expect(s.revision.synced).toBeUndefined();
    expect(s.drift.map((d: any) => d.category)).toContain('missing');
    expect(s.environments.find((e: any) => e.projectEnv === ENV)?.synced).toBe(false);
    expect(await f.emu.clients(ENV)).toEqual([]);
    expect(await stop(agent)).toMatchObject({ code: 0 });
  });

  it(
    'sync: applies the first commit and a pushed one by itself, reports hand-made drift without healing it, never applies an invalid commit',
    async () => {
      const agent = await startAgent(f, ['--path', 'config', '--interval', '1s', '--mode', 'sync']);
      await until(agent, 'the first commit applied', (x) => x.revision.synced === revs[0]);
      expect((await clientByName(f, 'alpha'))?.keys?.map((k) => k.name)).toEqual(['primary']);
      // The raw key is in the agent's store (under --state-dir), read with sops-age.
      const stored = await readSopsStore(storeFile(f), ageKey(f));
      expect(Object.keys(stored).length).toBe(1);
      expect(existsSync(path.join(f.stateDir, 'source', 'config', '.kms-sync'))).toBe(false); // nothing of the agent's in the checkout

      revs.push(
        f.repo.push(
          {
            [CONFIG]: agentConfig([
              { name: 'alpha', keys: ['primary'], ip: '' },
              { name: 'beta', keys: ['primary'] },
            ]),
          },
          'add beta',
        ),
      );
      await until(agent, 'the pushed commit applied', (x) => x.revision.synced === revs[1]);
      expect(await clientByName(f, 'beta')).toBeDefined();
      expect(metric(await agent.metrics(), 'kms_sync_synced_revision_info', { revision: revs[1]! })).toBe(1);
      const m = await agent.metrics();
      expect(metric(m, 'kms_sync_api_requests_total', { kind: 'list_clients' }) ?? 0).toBeGreaterThan(0);
      expect(Number(/^kms_sync_lock_wait_seconds_count (\d+)/m.exec(m)?.[1])).toBeGreaterThan(0);

      // Drift by hand: alpha's IP allow-list changed in the service.
      const alpha = (await clientByName(f, 'alpha'))!;
      await f.emu.call('PUT', `/client/${alpha.id}?project_env=${ENV}`, { ipWhitelist: ['192.0.2.1/32'] });
      const drifted = await until(agent, 'the drift reported', (x) =>
        x.drift.some((d: any) => d.category === 'changed_outside'),
      );
      const item = drifted.drift.find((d: any) => d.category === 'changed_outside');
      expect(item.address).toContain('alpha');
      expect(item.fields).toContainEqual({ path: 'ipWhitelist', before: ['192.0.2.1/32'], after: [] });
      expect(drifted.environments.find((e: any) => e.projectEnv === ENV)).toMatchObject({ synced: false, drift: 1 });
      expect(
        metric(await agent.metrics(), 'kms_sync_drift_items', { environment: ENV, category: 'changed_outside' }),
      ).toBe(1);
      // Not healed in sync mode: two more reconciles later it is still there.
      const seen = (await agent.status()).reconciles;
      await until(
        agent,
        'two more reconciles',
        (x) => x.reconciles >= seen + 2 && x.lastReconcile.startedAt > drifted.lastReconcile.finishedAt,
      );
      expect((await clientByName(f, 'alpha'))!).toMatchObject({ ipWhitelist: ['192.0.2.1/32'] });

      // An invalid commit: never applied, reported with file:line; the last good revision stays.
      const invalid = f.repo.push(
        {
          [CONFIG]: agentConfig([
            { name: 'alpha', keys: ['primary'], ip: '' },
            { name: 'beta', keys: ['primary'] },
            { name: 'gamma', keys: ['primary'] },
          ]).replace('rateLimitDay: 100000', 'rateLimitDay: lots'),
        },
        'broken',
      );
      const bad = await until(
        agent,
        'the invalid commit reported',
        (x) => x.revision.invalid?.revision === invalid && x.lastReconcile.result === 'invalid',
      );
      expect(bad.revision.invalid.errors.join('\n')).toMatch(/config\/kms-sync\.yaml:10:\d+/);
      expect(bad.revision.synced).toBe(revs[1]);
      expect(bad.revision.lastGood).toBe(revs[1]);
      expect(await clientByName(f, 'gamma')).toBeUndefined();
      expect(metric(await agent.metrics(), 'kms_sync_reconcile_total', { result: 'invalid' })).toBeGreaterThan(0);
      expect((await agent.get('/')).text).toContain('Invalid revision');

      const t = await stop(agent);
      expect(t.code, agent.output()).toBe(0);
      expect(t.ms).toBeLessThan(10_000);
    },
    patient(90_000),
  );

  it(
    'self-heal heals drift; webhooks with a good signature reconcile at once, bad ones get 401; suspend and resume',
    async () => {
      // A long interval: anything that happens after the first reconcile comes from a webhook or a resume.
      const agent = await startAgent(f, ['--path', 'config', '--interval', '1h', '--mode', 'self-heal']);
      await until(agent, 'the first reconcile', (x) => x.reconciles >= 1);
      // Still the invalid head: reconciled against the last good revision, and the drift healed.
      expect((await clientByName(f, 'alpha'))!).toMatchObject({ ipWhitelist: [] });
      const alpha = (await clientByName(f, 'alpha'))!;
      await f.emu.call('PUT', `/client/${alpha.id}?project_env=${ENV}`, { ipWhitelist: ['198.51.100.7/32'] });

      const body = JSON.stringify({ ref: 'refs/heads/main', after: 'x' });
      expect(
        (
          await agent.post('/hooks/github', body, {
            'x-hub-signature-256': githubSignature(body, 'wrong'),
            'x-github-event': 'push',
          })
        ).status,
      ).toBe(401);
      expect((await agent.post('/hooks/github', body, { 'x-github-event': 'push' })).status).toBe(401);
      expect((await agent.post('/hooks/gitlab', body, { 'x-gitlab-token': 'wrong' })).status).toBe(401);
      expect((await agent.status()).reconciles).toBe(1);

      revs.push(
        f.repo.push(
          {
            [CONFIG]: agentConfig([
              { name: 'alpha', keys: ['primary'], ip: '' },
              { name: 'beta', keys: ['primary'] },
              { name: 'gamma', keys: ['primary'] },
            ]),
          },
          'fix, add gamma',
        ),
      );
      const res = await agent.post('/hooks/github', body, {
        'x-hub-signature-256': githubSignature(body),
        'x-github-event': 'push',
      });
      expect(res.status).toBe(202);
      // Finished, not only synced (its drift, inventory and history come after): the suspended stretch
      // below counts reconciles and must not see this one end in it.
      await until(
        agent,
        'the webhook reconcile',
        (x) => x.revision.synced === revs[2] && x.lastReconcile?.revision === revs[2],
      );
      expect(await clientByName(f, 'gamma')).toBeDefined();
      expect((await clientByName(f, 'alpha'))!).toMatchObject({ ipWhitelist: [] });
      // The heal is on record: the operation, its address and the field it changed back.
      const healed = /applied update client\.agent-production\/alpha .*ipWhitelist: .*198\.51\.100\.7/;
      expect(await logged(agent, healed)).toMatch(healed);
      expect((await agent.status()).revision.invalid).toBeUndefined();

      // Suspended: a webhook is accepted but nothing is reconciled until resumed.
      expect((await agent.post('/api/suspend', '{}', JSON_BODY)).status).toBe(200);
      revs.push(
        f.repo.push(
          {
            [CONFIG]: agentConfig([
              { name: 'alpha', keys: ['primary'], ip: '' },
              { name: 'beta', keys: ['primary'] },
              { name: 'gamma', keys: ['primary'] },
              { name: 'delta', keys: ['primary'] },
            ]),
          },
          'add delta',
        ),
      );
      const r2 = await agent.post('/hooks/gitlab', '{}', { 'x-gitlab-token': GITLAB_TOKEN });
      expect(JSON.parse(r2.text)).toEqual({ reconcile: 'suspended' });
      expect(
        metric(await agent.metrics(), 'kms_sync_suspended', {}) ??
          Number(/kms_sync_suspended (\d)/.exec(await agent.metrics())?.[1]),
      ).toBe(1);
      const before = (await agent.status()).reconciles;
      await new Promise((r) => setTimeout(r, 1500));
      expect((await agent.status()).reconciles).toBe(before);
      expect(await clientByName(f, 'delta')).toBeUndefined();
      expect((await agent.post('/api/resume', '{}', JSON_BODY)).status).toBe(200);
      await until(agent, 'the resumed reconcile', (x) => x.revision.synced === revs[3]);
      expect(await clientByName(f, 'delta')).toBeDefined();
      expect(await stop(agent)).toMatchObject({ code: 0 });
    },
    patient(90_000),
  );

  it(
    'SIGTERM during a reconcile: exits 0 within 10 s, lock released, every raw key it issued held',
    async () => {
      const many = Array.from({ length: 12 }, (_, i) => ({ name: `bulk${i}`, keys: ['primary', 'secondary'] }));
      const base = [
        { name: 'alpha', keys: ['primary'], ip: '' },
        { name: 'beta', keys: ['primary'] },
        { name: 'gamma', keys: ['primary'] },
        { name: 'delta', keys: ['primary'] },
      ];
      revs.push(f.repo.push({ [CONFIG]: agentConfig([...base, ...many]) }, 'bulk'));
      const trace = path.join(f.root, 'trace.txt');
      // Each key write is held 400 ms after it is journaled: the apply is in flight for seconds.
      const agent = await startAgent(
        f,
        ['--path', 'config', '--interval', '1h', '--mode', 'sync', '--parallelism', '2'],
        { KMS_SYNC_TEST_TRACE: trace, KMS_SYNC_TEST_PAUSE: 'after-journal:400' },
      );
      // Once a key is journaled, the apply is under way (the trace also has the configuration's
      // load before it: a SIGTERM there is test/agent/stop-before-apply.test.ts's case).
      const applying = () => existsSync(trace) && readFileSync(trace, 'utf8').includes('after-journal');
      expect(await waitFor(applying, 20_000), agent.output()).toBe(true);
      const t = await stop(agent);
      expect(t.code, agent.output()).toBe(0);
      expect(t.ms).toBeLessThan(10_000);
      expect(agent.output()).toMatch(/reconcile interrupted/);
      // The lock is released (a new run takes it at once) and the next start finishes the job.
      const again = await startAgent(f, [
        '--path',
        'config',
        '--interval',
        '1h',
        '--mode',
        'sync',
        '--lock-timeout',
        '0s',
      ]);
      await until(agent === again ? again : again, 'the bulk commit applied', (x) => x.revision.synced === revs[4]);
      expect(await stop(again)).toMatchObject({ code: 0 });
      const stored = await readSopsStore(storeFile(f), ageKey(f));
      const wanted = [...base, ...many].flatMap((c) =>
        c.keys.map((k) => ({ client: c.name, key: k, overlap: false, secret: `${ENV}/${c.name}/${k}` })),
      );
      const result = await checkInvariant({
        emu: f.emu,
        projectEnv: ENV,
        wanted,
        stored,
        reported: '',
        anySecret: true,
      });
      expect(result.problems).toEqual([]);
      expect(result.live.length).toBe(wanted.length);
    },
    patient(90_000),
  );
});
