// Reconcile health (issue 36): the Ready condition in /api/status and as
// kms_sync_reconcile_condition{type="Ready",status} (Flux's gotk_reconcile_condition), and a page
// that says "Unknown" with a banner while the service cannot be read, never "Synced" or "No drift"
// from the last successful read; /readyz stays 200 meanwhile (the pod can serve and reconcile).
// The revision is shown synced together with its environments (the API and the page read one
// object): never while the agent writes the synced revision's file, before its drift is reported.
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { agentConfig, fixture, startAgent, until, type AgentProc, type Fixture } from './lib.js';
import { patient, waitFor } from '../support/patience.js';

const ENV = 'agent-production';

const condition = (metrics: string, status: string) =>
  Number(
    new RegExp(`^kms_sync_reconcile_condition\\{type="Ready",status="${status}"\\} (\\d+)`, 'm').exec(metrics)?.[1],
  );

describe("the agent's reconcile health", () => {
  let f: Fixture;
  let agent: AgentProc;
  let rev: string;
  let trace: string;
  beforeAll(async () => {
    f = await fixture();
    rev = f.repo.push({ 'kms/kms-sync.yaml': agentConfig([{ name: 'alpha', keys: ['primary'] }]) }, 'first');
    trace = path.join(f.root, 'trace');
    // Held where the first reconcile records its revision as synced (a slow disk's fsync), so that
    // the status can be read inside that window.
    agent = await startAgent(f, ['--path', 'kms', '--interval', '1s', '--mode', 'sync'], {
      KMS_SYNC_TEST_TRACE: trace,
      KMS_SYNC_TEST_PAUSE: `revision-synced:${patient(1500)}`,
    });
  }, patient(60_000));
  afterAll(async () => {
    agent?.child.kill('SIGTERM');
    await agent?.exit;
    await f.cleanup();
  });

  it(
    'a revision is shown synced only together with its environments, in the API and on the page',
    async () => {
      const held = () => existsSync(trace) && readFileSync(trace, 'utf8').includes('revision-synced');
      expect(await waitFor(held, 30_000), agent.output().slice(-3000)).toBe(true);
      // Inside the window: the first reconcile has not finished.
      const during = await agent.status();
      const page = (await agent.get('/')).text;
      expect(during.lastReconcile, 'read while the reconcile is held').toBeUndefined();
      const shown = {
        synced: during.revision.synced ?? null,
        environments: during.environments.map((e: any) => e.projectEnv),
        pageSynced: /Synced revision<\/div><div class="n">([^<]*)</.exec(page)?.[1],
        pageRow: page.includes(`data-env="${ENV}"`),
      };
      expect([
        { synced: null, environments: [], pageSynced: '—', pageRow: false },
        { synced: rev, environments: [ENV], pageSynced: rev.slice(0, 12), pageRow: true },
      ]).toContainEqual(shown);
      // Once the reconcile has ended (its last line; waited for in the output, not by polling the
      // agent through the hold): the revision is shown synced with its environment.
      const ended = () => /INFO {2}reconciled/.test(agent.output());
      expect(await waitFor(ended, 30_000), agent.output().slice(-3000)).toBe(true);
      const after = await agent.status();
      expect(after.revision.synced).toBe(rev);
      expect(after.environments.map((e: any) => e.projectEnv)).toEqual([ENV]);
      expect((await agent.get('/')).text).toContain(`data-env="${ENV}"`);
    },
    patient(60_000),
  );

  it(
    'Ready is True after a successful reconcile, Unknown with a banner while the service is unreachable',
    async () => {
      const ok = await until(
        agent,
        'synced',
        (x) => x.revision.synced === rev && x.lastReconcile?.result === 'success',
      );
      expect(ok.condition).toMatchObject({ type: 'Ready', status: 'True', reason: 'ReconciliationSucceeded' });
      let m = await agent.metrics();
      expect([condition(m, 'True'), condition(m, 'False'), condition(m, 'Unknown')]).toEqual([1, 0, 0]);
      expect((await agent.get('/')).text).toContain('No drift');

      f.emu.stop();
      const down = await until(agent, 'the service unreachable', (x) => x.condition.status === 'Unknown', 30_000);
      expect(down.condition.reason).toBe('ServiceUnreachable');
      expect(down.serviceError).toBeTruthy();
      m = await agent.metrics();
      expect([condition(m, 'True'), condition(m, 'False'), condition(m, 'Unknown')]).toEqual([0, 0, 1]);
      const page = (await agent.get('/')).text;
      expect(page).toContain('Service unreachable');
      expect(page).not.toContain('No drift');
      expect(page).not.toMatch(/>Synced</);
      expect(page).toMatch(/>Unknown</);
      expect((await agent.get('/readyz')).status).toBe(200);
    },
    patient(90_000),
  );
});
