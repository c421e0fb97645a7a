// Reconcile health (issue 36): the Ready condition in /api/status and as
// kms_sync_reconcile_condition{type="Ready",status} (Flux's gotk_reconcile_condition), and a page
// that says "Unknown" with a banner while the service cannot be read, never "Synced" or "No drift"
// from the last successful read; /readyz stays 200 meanwhile (the pod can serve and reconcile).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { agentConfig, fixture, startAgent, until, type AgentProc, type Fixture } from './lib.js';
import { patient } from '../support/patience.js';

const condition = (metrics: string, status: string) =>
  Number(
    new RegExp(`^kms_sync_reconcile_condition\\{type="Ready",status="${status}"\\} (\\d+)`, 'm').exec(metrics)?.[1],
  );

describe("the agent's reconcile health", () => {
  let f: Fixture;
  let agent: AgentProc;
  beforeAll(async () => {
    f = await fixture();
  });
  afterAll(async () => {
    agent.child.kill('SIGTERM');
    await agent.exit;
    await f.cleanup();
  });

  it(
    'Ready is True after a successful reconcile, Unknown with a banner while the service is unreachable',
    async () => {
      const rev = f.repo.push({ 'kms/kms-sync.yaml': agentConfig([{ name: 'alpha', keys: ['primary'] }]) }, 'first');
      agent = await startAgent(f, ['--path', 'kms', '--interval', '1s', '--mode', 'sync']);
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
