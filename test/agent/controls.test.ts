// Operator controls of the agent (issue 36): POST /api/reconcile reconciles now (Flux's `flux
// reconcile`); webhooks reconcile only for a push of the watched ref (another branch, a tag, an
// issue comment or a pipeline event is answered 202 "ignored" and reconciles nothing); detect mode
// sends the service no write at all (not even the run lock's record), counted by the emulator.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  agentConfig,
  fixture,
  logged,
  githubSignature,
  GITLAB_TOKEN,
  JSON_BODY,
  startAgent,
  until,
  type AgentProc,
  type Fixture,
} from './lib.js';
import { patient, waitFor } from '../support/patience.js';

describe("the agent's operator controls", () => {
  let f: Fixture;
  let agent: AgentProc;
  beforeAll(async () => {
    f = await fixture();
    f.repo.push({ 'kms/kms-sync.yaml': agentConfig([{ name: 'alpha', keys: ['primary'] }]) }, 'first');
    // A long interval: every reconcile after the first comes from a webhook or the API.
    agent = await startAgent(f, ['--path', 'kms', '--interval', '1h', '--mode', 'detect', '--ref', 'main']);
    await until(agent, 'the first reconcile', (x) => x.reconciles === 1);
  });
  afterAll(async () => {
    agent.child.kill('SIGTERM');
    await agent.exit;
    await f.cleanup();
  });
  const reconciles = async () => (await agent.status()).reconciles;

  it(
    'webhooks reconcile only for pushes of the watched ref',
    async () => {
      const hook = async (body: object, event: string) => {
        const text = JSON.stringify(body);
        return JSON.parse(
          (
            await agent.post('/hooks/github', text, {
              'x-hub-signature-256': githubSignature(text),
              'x-github-event': event,
            })
          ).text,
        );
      };
      expect(await hook({ ref: 'refs/heads/feature', after: 'a1' }, 'push')).toEqual({ reconcile: 'ignored' });
      expect(await hook({ ref: 'refs/tags/main-v1', after: 'a2' }, 'push')).toEqual({ reconcile: 'ignored' });
      expect(await hook({ ref: 'refs/heads/main', action: 'created' }, 'issue_comment')).toEqual({
        reconcile: 'ignored',
      });
      const gl = await agent.post(
        '/hooks/gitlab',
        JSON.stringify({ ref: 'refs/heads/main', object_kind: 'pipeline' }),
        { 'x-gitlab-token': GITLAB_TOKEN, 'x-gitlab-event': 'Pipeline Hook' },
      );
      expect(JSON.parse(gl.text)).toEqual({ reconcile: 'ignored' });
      await new Promise((r) => setTimeout(r, 500));
      expect(await reconciles()).toBe(1);
      expect(await hook({ ref: 'refs/heads/main', after: 'a3' }, 'push')).toEqual({ reconcile: 'accepted' });
      await until(agent, 'the push reconciled', (x) => x.reconciles === 2);
      const ignored = /webhook ignored: not a push of the watched ref \(refs\/heads\/feature\)/;
      expect(await logged(agent, ignored)).toMatch(ignored);
    },
    patient(60_000),
  );

  it('detect mode never writes: no run lock record, no write request of any kind, across its reconciles', async () => {
    expect(await reconciles()).toBeGreaterThanOrEqual(2);
    const counts = await f.emu.counts();
    const reads = Object.entries(counts).filter(([route, n]) => route.startsWith('GET ') && n > 0);
    const writes = Object.entries(counts).filter(([route, n]) => /^(POST|PUT|PATCH|DELETE) /.test(route) && n > 0);
    expect(reads.length).toBeGreaterThan(0); // it did read the service
    expect(writes).toEqual([]);
  });

  it(
    'POST /api/reconcile reconciles now; it is a write (JSON, same origin)',
    async () => {
      const before = await reconciles();
      expect((await agent.post('/api/reconcile', '{}', { 'content-type': 'text/plain' })).status).toBe(415);
      const res = await agent.post('/api/reconcile', '{}', JSON_BODY);
      expect(res.status).toBe(202);
      expect(JSON.parse(res.text)).toEqual({
        reconcile: 'accepted',
        requestedAt: expect.stringMatching(/^\d{4}-\d\d-\d\dT/),
      });
      const s = await until(agent, 'the requested reconcile', (x) => x.reconciles === before + 1);
      expect(s.lastReconcile.trigger).toBe('manual');
    },
    patient(60_000),
  );

  it(
    "SIGTERM while the log's reader lags: every line is written before the agent exits 0, 'stopped' last",
    async () => {
      // The reader stops reading (as a busy log collector or CI runner does) while the agent logs
      // more than the pipe and this side's buffer hold: a few hundred ignored pushes, each named.
      const stdout = agent.child.stdout!;
      stdout.pause();
      const pushes = 800;
      const ref = (i: number) => `refs/heads/lag-${i}-${'x'.repeat(180)}`;
      for (let i = 0; i < pushes; i += 20)
        await Promise.all(
          Array.from({ length: 20 }, (_, j) => {
            const text = JSON.stringify({ ref: ref(i + j), after: 'lag' });
            return agent.post('/hooks/github', text, {
              'x-hub-signature-256': githubSignature(text),
              'x-github-event': 'push',
            });
          }),
        );
      let exited = false;
      void agent.exit.then(() => {
        exited = true;
      });
      agent.child.kill('SIGTERM');
      // Its server closed (or it is gone): the agent has stopped, its last lines wait in the pipe.
      const closed = () =>
        agent.get('/healthz').then(
          () => exited,
          () => true,
        );
      await waitFor(closed, 20_000);
      await new Promise((r) => setTimeout(r, 500));
      stdout.resume();
      expect(await agent.exit).toBe(0);
      const lines = agent.output().trimEnd().split('\n');
      const missing = Array.from({ length: pushes }, (_, i) => i).filter(
        (i) => !lines.some((l) => l.includes(`(refs/heads/lag-${i}-`)),
      );
      expect(missing, `the log's last lines: ${lines.slice(-3).join('\n')}`).toEqual([]);
      expect(lines.findIndex((l) => l.includes('SIGTERM received'))).toBeGreaterThan(
        lines.findIndex((l) => l.includes(`(refs/heads/lag-${pushes - 1}-`)),
      );
      expect(lines.at(-1)).toMatch(/INFO {2}stopped$/);
    },
    patient(60_000),
  );
});
