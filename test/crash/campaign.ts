// The crash campaign (issue 10, windows counted since issue 24): mutate a desired state, run
// `kms-sync apply`/`rotate` as a real process against the emulator (its own process) with faults,
// kill it (SIGKILL or SIGINT) at random moments and deliberately inside each window that matters
// — issued but not journaled (the service committed, the response is held back), journaled but
// not stored (paused at after-journal), stored but not cleared (paused at after-store), a revoke
// on the wire (paused at before-revoke/revoke-sent, the DELETE dropped) — then re-run `apply`
// until it converges and check, independently of kms-sync's code (sops-age decrypts the store,
// the service validates every raw value), the invariant (lib.ts checkInvariant), an empty
// journal, no raw key printed and an empty next plan. Every SIGKILL is counted in the window the
// pipeline trace (KMS_SYNC_TEST_TRACE) says it landed in. Since issue 40 it also drops the
// response of a `rotate --revoke-old`'s key-issuing request, then aims a kill at each later point in
// turn (lib.ts LOST_AIMS), and checks after every convergence that no key a `--revoke-old` run
// superseded is live (the invariant alone would let the default 7-day overlap pass).
import { existsSync, mkdirSync, mkdtempSync, renameSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import {
  checkInvariant,
  configYaml,
  killAfterLostResponse,
  LOST_AIMS,
  lostResponseEnv,
  lostResponseFaults,
  mutationStep,
  problemKey,
  Emulator,
  kmsSync,
  newFigures,
  printedSecrets,
  readSopsStore,
  rng,
  routeTotals,
  sleep,
  supersededLive,
  Trace,
  waitFor,
  type DesiredClient,
  type Figures,
  type KillWindow,
  type Proc,
} from './lib.js';
import { patient } from '../support/patience.js';

const PROJECT_KEY = 'sk_test_crashcampaign0000000000';
const ENV = 'crash-production';

/** How an iteration disturbs its run. The `aim-*` ones SIGKILL inside one window. */
export type Disturbance =
  | 'random-kill'
  | 'aim-issued-not-journaled'
  | 'aim-journaled-not-stored'
  | 'aim-stored-not-cleared'
  | 'aim-revoke-sent'
  | 'sigint'
  | 'double-sigint'
  | 'dropped-responses'
  | 'store-fails'
  | 'lost-response-then-kill';
const DISTURBANCES: Disturbance[] = [
  'random-kill',
  'random-kill',
  'aim-issued-not-journaled',
  'aim-journaled-not-stored',
  'aim-stored-not-cleared',
  'aim-revoke-sent',
  'sigint',
  'double-sigint',
  'dropped-responses',
  'store-fails',
  'lost-response-then-kill',
];
const AIM_FIRST: Disturbance[] = [
  'aim-issued-not-journaled',
  'aim-journaled-not-stored',
  'aim-stored-not-cleared',
  'aim-revoke-sent',
  'lost-response-then-kill',
];
const AIMED: Partial<Record<Disturbance, KillWindow>> = {
  'aim-issued-not-journaled': 'issued-not-journaled',
  'aim-journaled-not-stored': 'journaled-not-stored',
  'aim-stored-not-cleared': 'stored-not-cleared',
  'aim-revoke-sent': 'revoke-sent',
};

export interface CampaignOptions {
  seed: number;
  iterations: number;
  log?: (line: string) => void;
}

export interface CampaignReport extends Figures {
  iterations: number;
  /** Iterations per disturbance. */
  byDisturbance: Record<string, number>;
  /** Where the SIGKILLs of each disturbance landed: disturbance → window → kills. */
  landed: Record<string, Partial<Record<KillWindow, number>>>;
  /** Aimed kills that landed in the window they aimed at / all aimed kills. */
  aimedHits: number;
  aimedKills: number;
  orphansLive: number;
  /** Strays that are old generations kept by `rotate` without --revoke-old, on keys without an overlap. */
  keptByRotate: number;
}

export async function runCampaign(o: CampaignOptions): Promise<CampaignReport> {
  const log = o.log ?? (() => {});
  const r = rng(o.seed);
  const dir = mkdtempSync(path.join(tmpdir(), 'kms-sync-crash-'));
  const cfgDir = path.join(dir, 'config');
  mkdirSync(cfgDir, { recursive: true });
  const keyFile = path.join(dir, 'age-keys.txt');
  const storeFile = path.join(cfgDir, '.kms-sync', 'secrets.sops.yaml');
  const journalFile = path.join(cfgDir, '.kms-sync', 'journal');
  const trace = new Trace(path.join(dir, 'trace'));
  const emu = new Emulator(path.join(dir, 'emulator.json'), PROJECT_KEY);
  await emu.start();
  const env = {
    PATH: process.env.PATH,
    HOME: dir,
    NO_COLOR: '1',
    KMS_API_URL: emu.url,
    KMS_API_KEY: PROJECT_KEY,
    SOPS_AGE_KEY_FILE: keyFile,
    KMS_SYNC_ALLOW_LOCAL_STORE: '1',
    KMS_SYNC_TEST_TRACE: trace.file,
    // KMS_SYNC_APPLY_HOLD_OPERATIONS=0: every apply goes environment by environment (engine/stream-apply.ts).
    ...(process.env.KMS_SYNC_APPLY_HOLD_OPERATIONS
      ? { KMS_SYNC_APPLY_HOLD_OPERATIONS: process.env.KMS_SYNC_APPLY_HOLD_OPERATIONS }
      : {}),
  };
  const report: CampaignReport = {
    ...newFigures('apply/rotate campaign', o.seed),
    iterations: o.iterations,
    byDisturbance: {},
    landed: {},
    aimedHits: 0,
    aimedKills: 0,
    orphansLive: 0,
    keptByRotate: 0,
  };
  const outputs: string[] = [];
  const everHeld = new Set<string>(); // key prefixes of every raw value the store ever held
  const seenKeyIds = new Set<string>();
  const lostIds = new Set<string>();
  const strayIds = new Set<string>();
  const keptByRotate = new Set<string>();
  const problemsSeen = new Set<string>(); // a key that stays wrong is reported once, where it was first seen
  // Generations a `rotate --revoke-old` of this iteration superseded: none may be live once it converged.
  let superseded: { id: string; client: string; name: string }[] = [];
  let lostRounds = 0;

  const run = (args: string[], extraEnv: Record<string, string> = {}): Proc => {
    report.runs++;
    return kmsSync(args, { cwd: dir, env: { ...env, ...extraEnv }, sink: outputs });
  };
  const readStore = async () => {
    const s = await readSopsStore(storeFile, keyFile);
    for (const v of Object.values(s)) everHeld.add(v.slice(0, 12));
    return s;
  };
  const observe = async () => {
    for (const k of await emu.liveKeys(ENV)) seenKeyIds.add(k.id);
  };
  const fileSize = (f: string) => {
    try {
      return statSync(f).size;
    } catch {
      return -1;
    }
  };

  const clients: DesiredClient[] = [];
  let serial = 0;
  const mutate = () => {
    const steps = r.int(1, 3);
    for (let i = 0; i < steps; i++) mutationStep(r, clients, () => `c${++serial}`);
    writeFileSync(path.join(cfgDir, 'kms-sync.yaml'), configYaml(clients));
  };

  let runMs = 1000; // how long an apply takes here (moving average), so that random kills land inside runs
  const converge = async (): Promise<boolean> => {
    for (let attempt = 1; attempt <= 5; attempt++) {
      const started = Date.now();
      const p = run(['apply', '-f', 'config', '--auto-approve']);
      const code = await p.exit;
      runMs = Math.round(runMs * 0.7 + (Date.now() - started) * 0.3);
      if (code === 0) return true;
      log(
        `  converge attempt ${attempt} exited ${code}: ${p
          .output()
          .split('\n')
          .filter((l) => /FAILED|Error|Reason/.test(l))
          .slice(0, 3)
          .join(' | ')}`,
      );
    }
    return false;
  };

  try {
    mutate();
    if (!(await converge())) report.failures.push('initial apply did not converge');
    await readStore();
    for (let it = 1; it <= o.iterations; it++) {
      // The aimed windows come first, one each, so that even a short run reaches all of them.
      const how = it <= AIM_FIRST.length ? AIM_FIRST[it - 1]! : r.pick(DISTURBANCES);
      report.byDisturbance[how] = (report.byDisturbance[how] ?? 0) + 1;
      // A revoke needs a key to revoke: rotate one with --revoke-old (or remove one from the config).
      const forcedRotate = how === 'aim-revoke-sent' || how === 'lost-response-then-kill';
      const rotate = clients.length > 0 && (forcedRotate || r.next() < 0.25);
      if (!rotate) mutate();
      const target = rotate ? r.pick(clients) : undefined;
      const targetKey = target ? r.pick(target.keys) : undefined;
      const revokeOld = forcedRotate || r.next() < 0.5;
      const lostAim =
        how === 'lost-response-then-kill' && rotate ? LOST_AIMS[lostRounds++ % LOST_AIMS.length]! : undefined;
      if (rotate && revokeOld) {
        const gens = (await emu.liveKeys(ENV))
          .filter((k) => k.client === target!.name && k.name === targetKey!.name)
          .sort((a, b) => (a.createdAt < b.createdAt ? -1 : 1));
        const current = gens[gens.length - 1];
        if (current) superseded.push({ id: current.id, client: current.client, name: current.name });
      }
      const args = rotate
        ? [
            'rotate',
            '-f',
            'config',
            '--key',
            `key.${ENV}/${target!.name}/${targetKey!.name}`,
            '--auto-approve',
            ...(revokeOld ? ['--revoke-old'] : []),
          ]
        : ['apply', '-f', 'config', '--auto-approve'];
      // A rotation without --revoke-old of a key without an overlap keeps the old generation live
      // (until it expires: never, here) while the store holds only the new raw value. The invariant
      // calls it a stray; the figures count these apart from the strays of lost revokes and kills.
      if (rotate && !revokeOld && !targetKey!.overlap) {
        for (const k of await emu.liveKeys(ENV))
          if (k.client === target!.name && k.name === targetKey!.name) keptByRotate.add(k.id);
      }
      const issuing = [
        ['PUT', '/client/{client_uuid}'],
        ['POST', '/client'],
      ] as const;
      const issueCount = async () => (await emu.count('PUT /client/{client_uuid}')) + (await emu.count('POST /client'));
      let extraEnv: Record<string, string> = {};
      if (how === 'aim-journaled-not-stored') extraEnv = { KMS_SYNC_TEST_PAUSE: `after-journal:${patient(1500)}` };
      if (how === 'aim-stored-not-cleared') extraEnv = { KMS_SYNC_TEST_PAUSE: `after-store:${patient(1500)}` };
      if (how === 'aim-revoke-sent') {
        extraEnv = { KMS_SYNC_TEST_PAUSE: `before-revoke:${patient(1500)},revoke-sent:${patient(1500)}` };
        // The revoke goes out and is lost: dropped before the service commits it.
        await emu.faults([{ method: 'DELETE', route: '/client/{client_uuid}', mode: 'drop', times: 50 }]);
      }
      if (how === 'aim-issued-not-journaled' || how === 'store-fails')
        await emu.faults(
          issuing.map(([method, route]) => ({ method, route, mode: 'delay-after-commit', delayMs: 1500, times: 3 })),
        );
      if (lostAim) {
        extraEnv = lostResponseEnv(lostAim, 1500);
        await lostResponseFaults([emu], lostAim, 1500);
      }
      if (how === 'dropped-responses') {
        const [method, route] = r.pick(issuing);
        await emu.faults([
          { method, route, mode: 'drop-after-commit', times: r.int(1, 2) },
          { method: 'GET', route: '/client', mode: '429', times: 1, retryAfterSeconds: 0 },
          { method: 'PUT', route: '/client/{client_uuid}', mode: 'error', status: 503, times: 1 },
        ]);
      }
      const issuedBefore = await issueCount();
      const deletesBefore = await emu.count('DELETE /client/{client_uuid}');
      const totalsBefore = await routeTotals([emu]);
      trace.mark();
      const p = run(args, extraEnv);
      const exited = () => p.child.exitCode !== null || p.child.signalCode !== null;
      let killed = false;
      let landed: KillWindow | undefined;
      let storeSwapped = false;
      const kill = async (sig: NodeJS.Signals) => {
        if (exited()) return;
        if (sig === 'SIGKILL') {
          landed = trace.classify(AIMED[how]);
          if (
            how === 'aim-revoke-sent' &&
            landed !== 'revoke-sent' &&
            (await emu.count('DELETE /client/{client_uuid}')) > deletesBefore
          )
            landed = 'revoke-sent'; // the service saw the DELETE (trace points not wired)
        }
        p.child.kill(sig);
        if (sig === 'SIGKILL') killed = true;
      };
      if (lostAim) {
        // A dropped key-issuing response, then a kill at a later point (one aim in turn).
        landed = await killAfterLostResponse({
          aim: lostAim,
          before: totalsBefore,
          trace,
          emus: [emu],
          r,
          exited,
          victim: () => p.child.pid,
          waitMs: 30_000,
        });
        killed = landed !== undefined;
      } else if (how === 'random-kill') {
        await Promise.race([sleep(r.int(20, Math.max(200, runMs))), p.exit]);
        await kill('SIGKILL');
      } else if (how === 'aim-issued-not-journaled') {
        if (
          await waitFor(
            async () => (trace.seen(['issue-sent']) !== undefined && (await issueCount()) > issuedBefore) || exited(),
            15_000,
          )
        ) {
          await sleep(r.int(0, 300));
          await kill('SIGKILL');
        }
      } else if (how === 'aim-journaled-not-stored' || how === 'aim-stored-not-cleared') {
        const point = how === 'aim-journaled-not-stored' ? 'after-journal' : 'after-store';
        if (await trace.waitFor([point], 15_000, exited)) {
          await sleep(r.int(0, 300));
          await kill('SIGKILL');
        }
      } else if (how === 'aim-revoke-sent') {
        if (
          await waitFor(
            async () =>
              trace.seen(['before-revoke', 'revoke-sent']) !== undefined ||
              (await emu.count('DELETE /client/{client_uuid}')) > deletesBefore ||
              exited(),
            15_000,
          )
        ) {
          await sleep(r.int(0, 100));
          await kill('SIGKILL');
        }
      } else if (how === 'sigint' || how === 'double-sigint') {
        await Promise.race([sleep(r.int(20, Math.max(200, runMs))), p.exit]);
        await kill('SIGINT');
        if (how === 'double-sigint') {
          await Promise.race([sleep(r.int(5, 300)), p.exit]);
          await kill('SIGINT');
        }
        // 30 s on a quiet machine, scaled to the load (the run finishes what is in flight first).
        const limit = patient(30_000);
        const finished = await Promise.race([p.exit.then(() => true), sleep(limit).then(() => false)]);
        if (!finished) {
          report.failures.push(`iteration ${it}: ${args[0]} did not exit within ${limit / 1000} s of SIGINT`);
          await kill('SIGKILL');
        }
      } else if (how === 'store-fails') {
        if (
          (await waitFor(async () => (await issueCount()) > issuedBefore || exited(), 8000)) &&
          existsSync(storeFile)
        ) {
          renameSync(storeFile, `${storeFile}.aside`);
          mkdirSync(storeFile);
          writeFileSync(path.join(storeFile, 'x'), 'not a store');
          storeSwapped = true;
        }
      }
      const code = await p.exit;
      if (killed && landed) {
        report.kills++;
        report.killsByWindow[landed]++;
        const l = (report.landed[lostAim ? `lost-response, then ${lostAim}` : how] ??= {});
        l[landed] = (l[landed] ?? 0) + 1;
        const aimed = lostAim
          ? lostAim === 'random'
            ? undefined
            : lostAim === 'reissue-unsent'
              ? 'issued-not-journaled'
              : lostAim
          : AIMED[how];
        if (aimed) {
          report.aimedKills++;
          if (aimed === landed) report.aimedHits++;
        }
      }
      if (storeSwapped) {
        rmSync(storeFile, { recursive: true, force: true });
        renameSync(`${storeFile}.aside`, storeFile);
      }
      await emu.faults(null);
      // 130: a SIGINT that came before anything was written (the interrupt's own exit code).
      if (!killed && code !== null && ![0, 1, 3, 130].includes(code))
        report.failures.push(`iteration ${it} (${how}): exit code ${code}`);
      await observe();
      await readStore();
      if (!(await converge())) report.failures.push(`iteration ${it} (${how}): apply did not converge`);
      const problems = await verify();
      const fresh = problems.filter((x) => !problemsSeen.has(problemKey(x)));
      report.failures.push(
        ...fresh.map((x) => `iteration ${it} (${how}, ${args[0]}${killed ? `, killed in ${landed}` : ''}): ${x}`),
      );
      log(
        `iteration ${it}/${o.iterations} ${how}${lostAim ? ` (${lostAim})` : ''} ${args[0]}${killed ? ` killed in ${landed}` : ` exit ${code}`}: ${problems.length ? `${problems.length} problems${fresh.length ? `, new: ${fresh.join('; ')}` : ' (seen before)'}` : 'ok'}`,
      );
      for (const x of problems) problemsSeen.add(problemKey(x));
    }
  } finally {
    emu.stop();
  }
  report.keysIssued = seenKeyIds.size;
  report.keysLost = lostIds.size;
  report.strays = strayIds.size;
  report.keptByRotate = [...strayIds].filter((id) => keptByRotate.has(id)).length;
  report.orphansLive = report.strays;
  report.failures.push(...printedSecrets(outputs));
  rmSync(dir, { recursive: true, force: true });
  return report;

  async function verify(): Promise<string[]> {
    const problems: string[] = [];
    if (existsSync(journalFile) && fileSize(journalFile) > 0)
      problems.push(`journal not empty (${fileSize(journalFile)} bytes)`);
    const stored = await readStore();
    await observe();
    const plan = run(['plan', '-f', 'config', '--detailed-exitcode']);
    const code = await plan.exit;
    if (code !== 0)
      problems.push(
        `plan after convergence exited ${code}: ${plan
          .output()
          .split('\n')
          .filter((l) => l.startsWith('  #'))
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
    // A generation a --revoke-old rotation superseded is live only while its rotation never took effect.
    for (const k of supersededLive(inv.live, superseded)) {
      strayIds.add(k.id);
      problems.push(
        `STRAY: live key ${k.client}/${k.name} (${k.id}) was superseded by rotate --revoke-old and is still live after convergence (expires ${k.expiresAt ?? 'never'})`,
      );
    }
    superseded = [];
    problems.push(
      ...inv.problems.map((p) =>
        p.startsWith('STRAY') && [...keptByRotate].some((id) => p.includes(id))
          ? `${p} [kept by a rotate without --revoke-old]`
          : p,
      ),
    );
    return problems;
  }
}
