// What the agent does between commits, as a real process: a key whose expiry entered its rotation
// window is rotated on schedule in sync mode (no new commit), its new raw key stored and the
// rotation on the timeline; a repository that cannot be reached keeps the last good revision and
// reports the error; /readyz follows the last successful reconcile; sync windows hold writes back.
import { renameSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { checkInvariant, printedSecrets, readSopsStore } from '../crash/lib.js';
import { agentConfig, fixture, startAgent, until, type Fixture } from './lib.js';
import { patient } from '../support/patience.js';

const ENV = 'agent-production';

describe('the agent between commits', () => {
  let f: Fixture;
  beforeAll(async () => {
    f = await fixture();
  });
  afterAll(async () => {
    expect(printedSecrets(f.outputs)).toEqual([]);
    await f.cleanup();
  });

  it(
    'rotates a key due for rotation in sync mode, keeps the last good revision while the repository is unreachable, and reports readiness',
    async () => {
      const rev = f.repo.push(
        { 'kms/kms-sync.yaml': agentConfig([{ name: 'alpha', keys: ['{ name: primary, ttl: 90d }'] }]) },
        'first',
      );
      const agent = await startAgent(f, ['--path', 'kms', '--interval', '1s', '--mode', 'sync']);
      await until(agent, 'the first commit applied', (x) => x.revision.synced === rev);
      expect((await agent.get('/readyz')).status).toBe(200);

      // The key's expiry moves into its rotation window (as time would): rotated without a new commit.
      const alpha = (await f.emu.clients(ENV)).find((c) => c.name === 'alpha')!;
      const key = alpha.keys![0]!;
      await f.emu.call('PUT', `/client/${alpha.id}?project_env=${ENV}`, {
        keys: [{ id: key.id, name: key.name, expiresAt: new Date(Date.now() + 2 * 86_400_000).toISOString() }],
      });
      const rotated = await until(agent, 'the rotation', (x) => x.timeline.some((e: any) => e.kind === 'rotated'));
      expect(rotated.timeline.find((e: any) => e.kind === 'rotated')).toMatchObject({
        address: `key.${ENV}/alpha/primary`,
        revision: rev,
      });
      expect(rotated.revision.synced).toBe(rev);
      const stored = await readSopsStore(
        path.join(f.stateDir, 'store', '.kms-sync', 'secrets.sops.yaml'),
        path.join(f.stateDir, 'age', 'keys.txt'),
      );
      const check = await checkInvariant({
        emu: f.emu,
        projectEnv: ENV,
        wanted: [{ client: 'alpha', key: 'primary', overlap: false, secret: `${ENV}/alpha/primary` }],
        stored,
        reported: '',
        anySecret: true,
      });
      expect(check.problems).toEqual([]);
      expect(check.live.filter((k) => k.name === 'primary').length).toBe(2); // the new key, and the old one for its overlap

      // The repository goes away: reported, the last good revision kept.
      renameSync(f.repo.origin, `${f.repo.origin}.away`);
      const away = await until(agent, 'the source error', (x) => x.lastReconcile?.result === 'source_error');
      expect(away.sourceError).toMatch(/git fetch failed/);
      expect(away.revision).toMatchObject({ fetched: rev, lastGood: rev, synced: rev });
      expect((await agent.get('/')).text).toContain('Source unreachable');
      renameSync(`${f.repo.origin}.away`, f.repo.origin);
      const back = await until(agent, 'the source back', (x) => x.lastReconcile?.result === 'success');
      expect(back.sourceError).toBeUndefined();
      expect((await agent.get('/readyz')).status).toBe(200);

      agent.child.kill('SIGTERM');
      expect(await agent.exit).toBe(0);
    },
    patient(90_000),
  );

  it(
    'outside its sync window a new commit is planned and reported, not applied; inside one it is',
    async () => {
      const rev = f.repo.push(
        {
          'kms/kms-sync.yaml': agentConfig([
            { name: 'alpha', keys: ['{ name: primary, ttl: 90d }'] },
            { name: 'beta', keys: ['primary'] },
          ]),
        },
        'add beta',
      );
      // A window on another day of the week than today (UTC): closed now, whatever the time.
      const other = ['Sun', 'Mon', 'Tue', 'Wed', 'Thu', 'Fri', 'Sat'][(new Date().getUTCDay() + 3) % 7]!;
      const closed = await startAgent(f, [
        '--path',
        'kms',
        '--interval',
        '1s',
        '--mode',
        'sync',
        '--sync-window',
        `${other} 00:00-24:00`,
      ]);
      const s = await until(
        closed,
        'a reconcile outside the window',
        (x) => x.lastReconcile?.revision === rev && /outside the sync window/.test(x.lastReconcile.note ?? ''),
      );
      expect(s.agent.syncWindowOpen).toBe(false);
      expect(s.revision.synced).not.toBe(rev);
      expect(s.drift.some((d: any) => d.category === 'missing' && d.address.includes('beta'))).toBe(true);
      expect((await f.emu.clients(ENV)).some((c) => c.name === 'beta')).toBe(false);
      expect((await closed.get('/')).text).toContain('Outside the sync window');
      closed.child.kill('SIGTERM');
      expect(await closed.exit).toBe(0);
      expect(
        await startAgent(f, ['--path', 'kms', '--sync-window', 'Funday 00:00-01:00']).catch((e: Error) => e.message),
      ).toMatch(/unknown day "Funday"/);

      const open = await startAgent(f, [
        '--path',
        'kms',
        '--interval',
        '1s',
        '--mode',
        'sync',
        '--sync-window',
        '* 00:00-24:00',
      ]);
      await until(open, 'the commit applied inside the window', (x) => x.revision.synced === rev);
      expect((await f.emu.clients(ENV)).some((c) => c.name === 'beta')).toBe(true);
      open.child.kill('SIGTERM');
      expect(await open.exit).toBe(0);
    },
    patient(90_000),
  );
});
