// Scenario: `kms-sync agent`, the long-running front end. Each iteration mutates the desired state
// the campaign's way (clients and keys added, removed, renamed, overlap toggled), pushes it as a
// commit to a bare git repository, and disturbs the agent that picks it up (--mode sync or
// self-heal, --interval 1s, one --state-dir across restarts): SIGKILL at a random moment or aimed
// inside a window (issued but not journaled: the service holds its answer back after committing;
// journaled but not stored, stored but not cleared: KMS_SYNC_TEST_PAUSE; a revoke on the wire, the
// DELETE dropped), or SIGTERM, after which it must exit 0 within 10 s. Then the agent is started
// again on the same state folder until /api/status says the revision is synced with no drift, and
// the invariant is checked independently of kms-sync's code: the agent's store (state/store, its
// age identity state/age/keys.txt) read with sops-age, every raw value validated by the service,
// an empty journal, an empty `kms-sync plan` of the same configuration over the same store, and no
// raw key in anything the agent or plan printed.
import { existsSync, mkdirSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { API_KEY, canUnshare, Repo, startAgent, type AgentProc, type Fixture } from '../agent/lib.js';
import {
  aimAndKill,
  aimEnv,
  aimFaults,
  checkInvariant,
  configYaml,
  kmsSync,
  mutationStep,
  newFigures,
  printedSecrets,
  problemKey,
  readSopsStore,
  rng,
  sleep,
  waitFor,
  workspace,
  type Aim,
  type DesiredClient,
  type MutationStep,
  type Figures,
  type KillWindow,
  type Proc,
} from './lib.js';
import { patient } from '../support/patience.js';

const ENV = 'crash-production';
const CONFIG = 'config/kms-sync.yaml';

/** How an iteration disturbs the agent. */
export type AgentDisturbance =
  | 'random-kill'
  | 'aim-issued-not-journaled'
  | 'aim-journaled-not-stored'
  | 'aim-stored-not-cleared'
  | 'aim-revoke-sent'
  | 'sigterm';
const AIM_FIRST: AgentDisturbance[] = [
  'aim-issued-not-journaled',
  'aim-journaled-not-stored',
  'aim-stored-not-cleared',
  'aim-revoke-sent',
];
const DISTURBANCES: AgentDisturbance[] = [
  'random-kill',
  'random-kill',
  'random-kill',
  ...AIM_FIRST,
  'sigterm',
  'sigterm',
];
const AIM_OF: Record<AgentDisturbance, Aim | undefined> = {
  'random-kill': 'random',
  'aim-issued-not-journaled': 'issued-not-journaled',
  'aim-journaled-not-stored': 'journaled-not-stored',
  'aim-stored-not-cleared': 'stored-not-cleared',
  'aim-revoke-sent': 'revoke-sent',
  sigterm: undefined,
};

export interface AgentScenarioOptions {
  seed: number;
  iterations: number;
  log?: (l: string) => void;
}

export interface AgentFigures extends Figures {
  /** SIGTERMs sent (of them, while an apply was in flight), and the longest time to exit. */
  sigterms: number;
  sigtermsInFlight: number;
  slowestStopMs: number;
  /** Aimed kills that landed in their window / all aimed kills. */
  aimedHits: number;
  aimedKills: number;
  /** Starts as PID 1 of its own PID/UTS namespaces (a container), as the same pod and as a new one. */
  pid1Starts: number;
  newPods: number;
}

export async function runAgentScenario(o: AgentScenarioOptions): Promise<AgentFigures> {
  const log = o.log ?? (() => {});
  const f: AgentFigures = {
    ...newFigures('agent (sync/self-heal)', o.seed),
    sigterms: 0,
    sigtermsInFlight: 0,
    slowestStopMs: 0,
    aimedHits: 0,
    aimedKills: 0,
    pid1Starts: 0,
    newPods: 0,
  };
  // Half the starts as a container runs the agent: PID 1 of its own namespaces, and then as the same
  // pod (host name) or a new one, on the same state folder (root and unshare(1) needed).
  const asContainer = canUnshare();
  let pods = 0;
  const r = rng(o.seed);
  const ws = workspace('agent');
  const procs: Proc[] = [];
  try {
    const emu = await ws.emulator(API_KEY);
    mkdirSync(path.join(ws.dir, 'git'));
    const repo = new Repo(path.join(ws.dir, 'git'));
    const stateDir = path.join(ws.dir, 'state');
    const fx: Fixture = { root: ws.dir, repo, emu, stateDir, outputs: ws.outputs, procs, cleanup: async () => {} };
    // Where the agent keeps the default store, its journal and the store's age identity (src/agent/agent.ts stateLayout).
    const storeFile = path.join(stateDir, 'store', '.kms-sync', 'secrets.sops.yaml');
    const journalFile = path.join(stateDir, 'store', '.kms-sync', 'journal');
    const ageKeyFile = path.join(stateDir, 'age', 'keys.txt');
    // `kms-sync plan` of the same configuration over the same store and journal: a folder whose .kms-sync is the agent's.
    const verifyDir = path.join(ws.dir, 'verify');
    mkdirSync(verifyDir);
    symlinkSync(path.join(stateDir, 'store', '.kms-sync'), path.join(verifyDir, '.kms-sync'));
    // Its store is the agent's, through the link: outside the folder on purpose, which the operator policy allows here.
    const planEnv = {
      PATH: process.env.PATH,
      HOME: ws.dir,
      NO_COLOR: '1',
      KMS_API_URL: emu.url,
      KMS_API_KEY: API_KEY,
      SOPS_AGE_KEY_FILE: ageKeyFile,
      KMS_SYNC_STORES_OUTSIDE_ROOT: '1',
    };

    const everHeld = new Set<string>();
    const seenKeyIds = new Set<string>();
    const lostIds = new Set<string>();
    const strayIds = new Set<string>();
    const problemsSeen = new Set<string>();
    const readStore = async () => {
      const s = await readSopsStore(storeFile, ageKeyFile);
      for (const v of Object.values(s)) everHeld.add(v.slice(0, 12));
      return s;
    };
    const observe = async () => {
      for (const k of await emu.liveKeys(ENV)) seenKeyIds.add(k.id);
    };
    const fileSize = (file: string) => (existsSync(file) ? statSync(file).size : 0);

    // ------------------------------------------------------------------ the desired state
    const clients: DesiredClient[] = [];
    let serial = 0;
    let commits = 0;
    const step = (what: MutationStep) => mutationStep(r, clients, () => `c${++serial}`, { what, newClients: 3 });
    /** One commit's worth of changes; `must` makes sure the commit issues a key, or revokes one. */
    const mutate = (must?: 'issue' | 'revoke') => {
      const steps = r.int(1, 3);
      for (let i = 0; i < steps; i++) {
        mutationStep(r, clients, () => `c${++serial}`, { newClients: 3 });
      }
      if (must === 'issue') step('add-client');
      if (must === 'revoke') {
        // A key removed from the configuration is revoked (one of a client with several keys, so that the client stays).
        let c = clients.find((x) => x.keys.length > 1);
        if (!c) {
          c = r.pick(clients);
          c.keys.push({ name: `k${c.keys.length + 7}`, overlap: false });
        }
        c.keys.splice(r.int(0, c.keys.length - 1), 1);
      }
      // The comment makes every commit a new revision, also when the steps changed nothing.
      const yaml = `# commit ${++commits}\n${configYaml(clients).replace('apiVersion: kms-sync/v1\n', 'apiVersion: kms-sync/v1\nowner: crash-agent\n')}`;
      writeFileSync(path.join(verifyDir, 'kms-sync.yaml'), yaml);
      return repo.push({ [CONFIG]: yaml }, `iteration: ${clients.length} clients`);
    };

    // ----------------------------------------------------------------------- the agent
    let agent: AgentProc | undefined;
    const exited = (p: Proc) => p.child.exitCode !== null || p.child.signalCode !== null;
    const start = async (extra: Record<string, string> = {}) => {
      f.runs++;
      const mode = r.pick(['sync', 'self-heal'] as const);
      let pod: { hostname: string } | undefined;
      if (asContainer && r.next() < 0.5) {
        f.pid1Starts++;
        if (pods === 0 || r.next() < 0.5) {
          pods++;
          f.newPods++;
        }
        pod = { hostname: `pod-${pods}` };
      }
      const a = await startAgent(
        fx,
        ['--path', 'config', '--interval', '1s', '--mode', mode, '--prune', '--lock-timeout', '20s'],
        { KMS_SYNC_TEST_TRACE: ws.trace.file, NO_COLOR: '1', ...extra },
        pod,
      );
      return a;
    };
    const sigterm = async (a: AgentProc, what: string) => {
      const t0 = Date.now();
      // To the agent itself: as PID 1, unshare (its parent) ignores SIGTERM while it waits.
      const pid = a.pid();
      if (pid !== undefined) process.kill(pid, 'SIGTERM');
      const code = await Promise.race([a.exit, sleep(15_000).then(() => 'timeout' as const)]);
      const ms = Date.now() - t0;
      f.slowestStopMs = Math.max(f.slowestStopMs, ms);
      if (code === 'timeout') {
        f.failures.push(`${what}: the agent did not exit within 15 s of SIGTERM`);
        try {
          process.kill(a.pid() ?? a.child.pid!, 'SIGKILL');
        } catch {
          /* gone */
        }
        await a.exit;
      } else if (code !== 0)
        f.failures.push(
          `${what}: the agent exited ${code} after SIGTERM (${ms} ms): ${a.output().split('\n').slice(-3).join(' | ')}`,
        );
      else if (ms > 10_000) f.failures.push(`${what}: the agent took ${ms} ms to exit after SIGTERM (more than 10 s)`);
    };

    // The first revision, synced without disturbance.
    let rev = mutate();
    agent = await start();
    for (let it = 1; it <= o.iterations; it++) {
      const how = it <= AIM_FIRST.length ? AIM_FIRST[it - 1]! : r.pick(DISTURBANCES);
      const aim = AIM_OF[how];
      const what = `iteration ${it} (${how})`;
      // An aimed kill needs its pause in the agent's environment: the agent starts again with it. A
      // random kill or a SIGTERM hits the running agent (if any) as it picks the push up.
      const inFlight = how === 'sigterm' && r.next() < 0.5;
      if (((aim && aim !== 'random') || inFlight) && agent) {
        await sigterm(agent, `${what}, stopping before an aimed start`);
        agent = undefined;
      }
      await aimFaults([emu], aim ?? 'random');
      rev = mutate(aim === 'revoke-sent' ? 'revoke' : (aim && aim !== 'random') || inFlight ? 'issue' : undefined);
      ws.trace.mark();
      const victim =
        agent ?? (await start(aim ? aimEnv(aim) : inFlight ? { KMS_SYNC_TEST_PAUSE: 'after-journal:300' } : {}));
      let landed: KillWindow | undefined;
      if (aim) {
        landed = await aimAndKill({
          aim,
          trace: ws.trace,
          emus: [emu],
          r,
          exited: () => exited(victim),
          victim: () => victim.pid(),
          randomMs: [50, 2500],
          waitMs: 30_000,
        });
        if (landed) {
          f.kills++;
          f.killsByWindow[landed]++;
          if (aim !== 'random') {
            f.aimedKills++;
            if (landed === aim) f.aimedHits++;
          }
        }
        if (!landed && !exited(victim)) await sigterm(victim, what); // the window never came: stop it the polite way
        await victim.exit;
      } else {
        // SIGTERM: at a random moment, or (when the agent started afresh, its writes held 300 ms
        // after each journal entry) while its apply is in flight.
        if (inFlight) await ws.trace.waitFor(['after-journal'], 20_000, () => exited(victim));
        else await sleep(r.int(50, 2500));
        f.sigterms++;
        if (inFlight && !exited(victim)) f.sigtermsInFlight++;
        await sigterm(victim, what);
      }
      await emu.faults(null);
      await observe();
      await readStore();

      // Started again on the same state folder: it finishes what the stopped one left.
      agent = await start();
      const a = agent;
      let last: any;
      // Its status asked when the agent logs (each reconcile's end), and every 200 ms otherwise (test/support/patience.ts).
      const settled = await waitFor(
        async () => {
          last = await a.status().catch(() => undefined);
          return (
            last?.revision?.synced === rev &&
            last?.lastReconcile?.result === 'success' &&
            last.drift.length === 0 &&
            fileSize(journalFile) === 0
          );
        },
        patient(45_000),
        { wake: () => a.output().length },
      );
      const problems: string[] = [];
      if (!settled)
        problems.push(
          `not settled within 45 s: synced ${last?.revision?.synced?.slice(0, 12)} (pushed ${rev.slice(0, 12)}), last reconcile ${last?.lastReconcile?.result} ${JSON.stringify(last?.lastReconcile?.errors ?? [])}, drift ${JSON.stringify((last?.drift ?? []).map((d: any) => `${d.category} ${d.address}`))}`,
        );
      problems.push(...(await verify()));
      const fresh = problems.filter((x) => !problemsSeen.has(problemKey(x)));
      for (const x of problems) problemsSeen.add(problemKey(x));
      f.failures.push(...fresh.map((x) => `${what}${landed ? `, killed in ${landed}` : ''}: ${x}`));
      log(
        `${what}${landed ? ` killed in ${landed}` : aim ? ' not killed (window not reached)' : inFlight ? ' SIGTERM during an apply' : ' SIGTERM'}: ${problems.length ? `${problems.length} problems${fresh.length ? `, new: ${fresh.join('; ')}` : ' (seen before)'}` : 'ok'}`,
      );
      // An agent that no longer settles makes every later iteration meaningless: stop here.
      if (!settled) break;
    }
    if (agent) await sigterm(agent, 'at the end');

    async function verify(): Promise<string[]> {
      const problems: string[] = [];
      if (fileSize(journalFile) > 0) problems.push(`journal not empty (${fileSize(journalFile)} bytes)`);
      const stored = await readStore();
      await observe();
      f.runs++;
      const plan = kmsSync(['plan', '-f', 'verify', '--detailed-exitcode'], {
        cwd: ws.dir,
        env: planEnv,
        sink: ws.outputs,
      });
      const code = await plan.exit;
      if (code !== 0)
        problems.push(
          `plan after the agent settled exited ${code}: ${plan
            .output()
            .split('\n')
            .filter((l) => l.startsWith('  #') || /rror|:\d+:/.test(l))
            .slice(0, 4)
            .join(' | ')}`,
        );
      const wanted = clients.flatMap((c) =>
        c.keys.map((k) => ({ client: c.name, key: k.name, overlap: k.overlap, secret: `${ENV}/${c.name}/${k.name}` })),
      );
      const inv = await checkInvariant({
        emu,
        projectEnv: ENV,
        wanted,
        stored,
        everHeld,
        reported: code === 2 ? plan.output() : '',
      });
      for (const id of inv.lostIds) lostIds.add(id);
      for (const id of inv.strayIds) strayIds.add(id);
      problems.push(...inv.problems);
      return problems;
    }
    f.keysIssued = seenKeyIds.size;
    f.keysLost = lostIds.size;
    f.strays = strayIds.size;
    f.notes.push(
      `SIGTERMs ${f.sigterms}, ${f.sigtermsInFlight} of them during an apply (slowest exit ${f.slowestStopMs} ms); aimed kills in their window ${f.aimedHits}/${f.aimedKills}; starts as PID 1 of a container ${f.pid1Starts} (${f.newPods} pods)${asContainer ? '' : ' (unshare unavailable: none)'}`,
    );
  } finally {
    for (const p of procs) if (p.child.exitCode === null && p.child.signalCode === null) p.child.kill('SIGKILL');
    await Promise.all(procs.map((p) => p.exit));
    f.failures.push(...printedSecrets(ws.outputs));
    ws.cleanup();
  }
  return f;
}
