// The agent as a container runs it (issue 36): PID 1 of its own PID namespace, with its own host
// name (unshare --pid --fork --uts --mount-proc), SIGKILLed inside each window of a key's way to
// its store, then started again on the same state folder as the same "pod" (same host name, pid 1
// again) and as a new one (another host name). Locks the killed one left (the local run lock,
// the service's lock record) named "pid 1 on pod-a", which neither pid liveness nor the host name
// can judge; the agent owns its state folder by a kernel lock and breaks what an earlier start of
// it left, so its first reconcile after the restart converges (with --lock-timeout 0s, a lock it
// did not break would say `locked`). So do the lock files of the store and the journal: killed
// inside the store's lock, the restart in a new pod breaks it at once. Two agents on one state
// folder: the second waits.
import path from 'node:path';
import { statSync, existsSync, readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  aimAndKill,
  aimEnv,
  aimFaults,
  checkInvariant,
  printedSecrets,
  readSopsStore,
  rng,
  Trace,
  waitFor,
  type Aim,
} from '../crash/lib.js';
import { skipWhen } from '../support/skip.js';
import {
  agentConfig,
  canUnshare,
  fixture,
  startAgent,
  until,
  type AgentProc,
  type ClientSpec,
  type Fixture,
} from './lib.js';
import { patient } from '../support/patience.js';

const ENV = 'agent-production';
const CONFIG = 'kms/kms-sync.yaml';
const usable = canUnshare();

describe.skipIf(skipWhen(!usable, 'the agent-as-PID-1 tests need root and unshare(1) with PID and UTS namespaces'))(
  'the agent as PID 1 of a container, killed and restarted',
  () => {
    let f: Fixture;
    const clients: ClientSpec[] = [{ name: 'base', keys: ['primary', 'secondary'] }];
    beforeAll(async () => {
      f = await fixture();
    });
    afterAll(async () => {
      expect(printedSecrets(f.outputs)).toEqual([]);
      await f.cleanup();
    });
    const trace = () => path.join(f.root, 'trace.txt');
    const journal = () => path.join(f.stateDir, 'store', '.kms-sync', 'journal');
    const args = ['--path', 'kms', '--interval', '5s', '--mode', 'sync', '--prune', '--lock-timeout', '0s'];

    /** SIGTERM to the agent itself (unshare ignores it while it waits for its child). */
    async function stop(a: AgentProc) {
      process.kill(a.pid()!, 'SIGTERM');
      return a.exit;
    }

    it(
      'killed in each key window as pid 1, restarted as the same pod and as a new one: converges at its first reconcile',
      async () => {
        let rev = f.repo.push({ [CONFIG]: agentConfig(clients) }, 'first');
        const first = await startAgent(f, args, {}, { hostname: 'pod-a' });
        await until(first, 'the first commit applied', (x) => x.revision.synced === rev);
        expect(await stop(first)).toBe(0);
        const r = rng(36);
        const aims: Aim[] = ['issued-not-journaled', 'journaled-not-stored', 'stored-not-cleared', 'revoke-sent'];
        for (const [i, aim] of aims.entries()) {
          if (aim === 'revoke-sent') clients[0]!.keys.pop();
          else clients.push({ name: `c${i}`, keys: ['primary'] });
          rev = f.repo.push({ [CONFIG]: agentConfig(clients) }, `step ${i}: ${aim}`);
          const t = new Trace(trace());
          t.mark();
          await aimFaults([f.emu], aim);
          const victim = await startAgent(
            f,
            args,
            { KMS_SYNC_TEST_TRACE: trace(), ...aimEnv(aim) },
            { hostname: 'pod-a' },
          );
          expect(victim.pid()).toBeGreaterThan(1);
          const landed = await aimAndKill({
            aim,
            trace: t,
            emus: [f.emu],
            r,
            exited: () => victim.child.exitCode !== null,
            victim: () => victim.pid(),
            waitMs: 30_000,
          });
          await victim.exit;
          await f.emu.faults(null);
          expect(landed, `${aim}\n${victim.output().slice(-3000)}`).toBe(aim);
          // It ran as pid 1: the trace names the pid each process had in its own namespace.
          expect(t.since().every((l) => l.pid === 1)).toBe(true);

          const pod = i % 2 === 0 ? 'pod-a' : `pod-${String.fromCharCode(98 + i)}`;
          const t0 = Date.now();
          const again = await startAgent(f, args, {}, { hostname: pod });
          const s = await until(
            again,
            `converged after the kill in ${aim} (restarted as ${pod})`,
            (x) => x.reconciles > 0,
            30_000,
          );
          // This start's first reconcile: the newest `start` row (the history also holds earlier starts').
          const firstRecord = s.history.find((h: any) => h.trigger === 'start');
          expect(firstRecord.startedAt >= s.agent.startedAt).toBe(true);
          expect(
            firstRecord.result,
            `${aim}, restarted as ${pod}: ${JSON.stringify(firstRecord)}\n${again.output().slice(-3000)}`,
          ).toBe('success');
          expect(s.revision.synced).toBe(rev);
          expect(Date.now() - t0).toBeLessThan(patient(5000 + 20_000)); // within one interval of its start (scaled for a loaded machine)
          expect(existsSync(journal()) ? statSync(journal()).size : 0).toBe(0);
          expect(await stop(again)).toBe(0);
        }
        const stored = await readSopsStore(
          path.join(f.stateDir, 'store', '.kms-sync', 'secrets.sops.yaml'),
          path.join(f.stateDir, 'age', 'keys.txt'),
        );
        const wanted = clients.flatMap((c) =>
          c.keys.map((k) => ({ client: c.name, key: k, overlap: false, secret: `${ENV}/${c.name}/${k}` })),
        );
        const inv = await checkInvariant({
          emu: f.emu,
          projectEnv: ENV,
          wanted,
          stored,
          reported: '',
          anySecret: true,
        });
        expect(inv.problems).toEqual([]);
      },
      patient(240_000),
    );

    it(
      'killed as pid 1 while it holds the store lock, restarted as a new pod: breaks the lock and stores every key at its first reconcile',
      async () => {
        const store = path.join(f.stateDir, 'store', '.kms-sync', 'secrets.sops.yaml');
        clients.push({ name: 'locked', keys: ['primary', 'secondary'] });
        const rev = f.repo.push({ [CONFIG]: agentConfig(clients) }, 'killed inside the store lock');
        const t = new Trace(trace());
        t.mark();
        const victim = await startAgent(
          f,
          args,
          { KMS_SYNC_TEST_TRACE: trace(), KMS_SYNC_TEST_PAUSE: 'store-locked:5000' },
          { hostname: 'pod-a' },
        );
        const at = await t.waitFor(['store-locked'], 30_000, () => victim.child.exitCode !== null);
        expect(at, victim.output().slice(-3000)).toBe('store-locked');
        process.kill(victim.pid()!, 'SIGKILL');
        await victim.exit;
        // What the kill left: the store's lock file, naming pid 1 on pod-a (neither judges it from another pod).
        const left = JSON.parse(readFileSync(`${store}.lock`, 'utf8')) as { pid: number; host: string };
        expect([left.pid, left.host]).toEqual([1, 'pod-a']);
        expect(existsSync(journal()) ? statSync(journal()).size : 0).toBeGreaterThan(0);

        const t0 = Date.now();
        const again = await startAgent(f, args, {}, { hostname: 'pod-lock' });
        const s = await until(again, 'converged after the kill inside the store lock', (x) => x.reconciles > 0, 30_000);
        // This start's first reconcile: the newest `start` row (the history also holds earlier starts').
        const firstRecord = s.history.find((h: any) => h.trigger === 'start');
        expect(firstRecord.startedAt >= s.agent.startedAt).toBe(true);
        expect(firstRecord.result, `${JSON.stringify(firstRecord)}\n${again.output().slice(-3000)}`).toBe('success');
        expect(s.revision.synced).toBe(rev);
        expect(Date.now() - t0).toBeLessThan(patient(5000 + 20_000)); // within one interval of its start (scaled for a loaded machine)
        expect(existsSync(journal()) ? statSync(journal()).size : 0).toBe(0);
        expect(existsSync(`${store}.lock`)).toBe(false);
        expect(await stop(again)).toBe(0);
        const stored = await readSopsStore(store, path.join(f.stateDir, 'age', 'keys.txt'));
        const wanted = clients.flatMap((c) =>
          c.keys.map((k) => ({ client: c.name, key: k, overlap: false, secret: `${ENV}/${c.name}/${k}` })),
        );
        const inv = await checkInvariant({
          emu: f.emu,
          projectEnv: ENV,
          wanted,
          stored,
          reported: '',
          anySecret: true,
        });
        expect(inv.problems).toEqual([]);
      },
      patient(120_000),
    );

    it(
      'a second agent on the same state folder waits while the first lives, and takes over when it is killed',
      async () => {
        const one = await startAgent(f, args, {}, { hostname: 'pod-a' });
        await until(one, 'the first agent reconciled', (x) => x.reconciles > 0);
        const two = await startAgent(f, args, {}, { hostname: 'pod-b' });
        expect(
          await waitFor(() => /another kms-sync agent holds the state folder/.test(two.output()), 10_000),
          two.output(),
        ).toBe(true);
        expect((await two.get('/readyz')).status).toBe(503);
        expect((await two.status()).reconciles).toBe(0);
        process.kill(one.pid()!, 'SIGKILL');
        await one.exit;
        await until(
          two,
          'the second agent took over',
          (x) => x.reconciles > 0 && x.lastReconcile.result === 'success',
          20_000,
        );
        expect((await two.get('/readyz')).status).toBe(200);
        expect(await stop(two)).toBe(0);
      },
      patient(90_000),
    );
  },
);
