// The agent's reconcile history (issue 36), against the agent as a real process: kept in the state
// folder (STATE/history.json, 0600) so a restart keeps it; identical outcomes one after another
// folded into one row with a count and first/last times (Flux's and Argo CD's "x N"); a changed
// outcome starts a new row; shown in /api/status, on the page and by `kms-sync agent status`; a
// damaged file, or one that cannot be written, is reported and never stops reconciles.
import { spawnSync } from 'node:child_process';
import { mkdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { cli, printedSecrets } from '../crash/lib.js';
import { agentConfig, fixture, logged, JSON_BODY, startAgent, until, type AgentProc, type Fixture } from './lib.js';
import { patient } from '../support/patience.js';

describe('the reconcile history', () => {
  let f: Fixture;
  let agent: AgentProc | undefined;
  // A long interval: every reconcile after the first is asked for through the API.
  const args = ['--path', 'kms', '--interval', '1h', '--mode', 'sync'];
  const file = () => path.join(f.stateDir, 'history.json');

  beforeAll(async () => {
    f = await fixture();
    f.repo.push({ 'kms/kms-sync.yaml': agentConfig([{ name: 'alpha', keys: ['primary'] }]) }, 'first');
  }, patient(60_000));
  afterAll(async () => {
    if (agent) await stop(agent);
    expect(printedSecrets(f.outputs)).toEqual([]);
    await f.cleanup();
  });

  async function stop(a: AgentProc): Promise<void> {
    a.child.kill('SIGTERM');
    expect(await a.exit).toBe(0);
  }
  async function start(): Promise<any> {
    agent = await startAgent(f, args);
    return until(agent, 'the first reconcile of this start', (x) => x.reconciles === 1);
  }
  async function reconcileNow(): Promise<any> {
    const before = (await agent!.status()).reconciles;
    expect((await agent!.post('/api/reconcile', '{}', JSON_BODY)).status).toBe(202);
    return until(agent!, `reconcile ${before + 1}`, (x) => x.reconciles === before + 1);
  }
  const rows = (s: any) => s.history.map((h: any) => `${h.trigger} ${h.result} ${h.applied}/${h.planned} × ${h.count}`);

  it(
    'five identical reconciles are one row × 5; a changed outcome starts a new row; kept in STATE/history.json (0600); shown by the CLI and the page',
    async () => {
      let s = await start();
      const first = rows(s)[0];
      expect(first).toMatch(/^start success ([1-9]\d*)\/\1 × 1$/);
      for (let i = 0; i < 5; i++) s = await reconcileNow();
      expect(s.reconciles).toBe(6);
      expect(rows(s)).toEqual(['manual success 0/0 × 5', first]);
      const five = s.history[0];
      expect(five.note).toBe('nothing to apply');
      // First and last times: the first of the five started before the last one (whose times the row has).
      expect(Date.parse(five.firstStartedAt)).toBeLessThan(Date.parse(five.startedAt));
      expect(five.startedAt).toBe(s.lastReconcile.startedAt);

      // A new revision: applied, a row of its own; the quiet reconcile after it starts another.
      const rev = f.repo.push(
        {
          'kms/kms-sync.yaml': agentConfig([
            { name: 'alpha', keys: ['primary'] },
            { name: 'beta', keys: ['primary'] },
          ]),
        },
        'beta',
      );
      s = await reconcileNow();
      expect(s.history[0]).toMatchObject({ revision: rev, subject: 'beta', count: 1 });
      const applied = rows(s)[0];
      expect(applied).toMatch(/^manual success ([1-9]\d*)\/\1 × 1$/);
      s = await reconcileNow();
      expect(rows(s)).toEqual(['manual success 0/0 × 1', applied, 'manual success 0/0 × 5', first]);

      // What /api/status shows is what the state folder holds, readable by the agent's user only.
      expect(statSync(file()).mode & 0o777).toBe(0o600);
      expect(JSON.parse(readFileSync(file(), 'utf8'))).toEqual(s.history);

      const cliStatus = spawnSync(process.execPath, [cli, 'agent', 'status', '--url', agent!.url], {
        cwd: f.root,
        env: { PATH: process.env.PATH, HOME: f.root },
        encoding: 'utf8',
      });
      f.outputs.push(cliStatus.stdout, cliStatus.stderr);
      expect(cliStatus.status, cliStatus.stderr).toBe(0);
      expect(cliStatus.stdout).toMatch(/^History {5}4 row\(s\)/m);
      expect(cliStatus.stdout).toMatch(/^ {2}success × 5 since \d+s ago, last \d+s ago \(manual, /m);

      const page = await agent!.get('/');
      expect(page.status).toBe(200);
      expect(page.text).toMatch(/data-count="5">× 5, since \d+s ago/);
    },
    patient(90_000),
  );

  it(
    'a restart keeps the history; the count of reconciles is the new process’s',
    async () => {
      const before = (await agent!.status()).history;
      await stop(agent!);
      const s = await start();
      expect(s.history.slice(1)).toEqual(before);
      expect(s.history[0]).toMatchObject({ trigger: 'start', result: 'success', count: 1 });
      expect(s.history[0].startedAt >= s.agent.startedAt).toBe(true);
    },
    patient(60_000),
  );

  it(
    'a damaged history file is reported and history starts again; one that cannot be written is reported; reconciles go on',
    async () => {
      await stop(agent!);
      writeFileSync(file(), '[{"startedAt": "cut off', { mode: 0o600 });
      let s = await start();
      const notJson = /history\.json in the state folder is not JSON; it starts empty/;
      expect(await logged(agent!, notJson)).toMatch(notJson);
      expect(rows(s)).toEqual(['start success 0/0 × 1']);
      expect(JSON.parse(readFileSync(file(), 'utf8'))).toEqual(s.history);

      // A folder where the file should be: it can be neither read nor replaced.
      await stop(agent!);
      rmSync(file());
      mkdirSync(file());
      s = await start();
      const unreadable = /history\.json in the state folder cannot be read \(EISDIR\); it starts empty/;
      expect(await logged(agent!, unreadable)).toMatch(unreadable);
      s = await reconcileNow();
      expect(s.lastReconcile.result).toBe('success');
      // Said once, naming the file, while the rows stay in memory: counted once the agent's output has
      // caught up with the manual reconcile's own line (logged after its history was kept, or not).
      const said =
        (await logged(agent!, /reconciled.* trigger=manual/)).match(
          /the reconcile history could not be kept \([^)]*history\.json/g,
        ) ?? [];
      expect(said).toHaveLength(1);
      expect(rows(s)).toEqual(['manual success 0/0 × 1', 'start success 0/0 × 1']);
      rmSync(file(), { recursive: true });
      s = await reconcileNow();
      expect(JSON.parse(readFileSync(file(), 'utf8'))).toEqual(s.history);
      expect(rows(s)).toEqual(['manual success 0/0 × 2', 'start success 0/0 × 1']);
    },
    patient(90_000),
  );
});
