// Scenario (issue 24 e): `kms-sync rotate --key … --revoke-old` killed as its revoke goes out
// (paused at before-revoke/revoke-sent, the DELETE dropped by the service before it commits), or
// not killed but with every DELETE dropped (the run stops part-way). Until the old key is gone,
// `plan` and `drift` must not say "No changes": they finish the revoke or report it; the next
// `apply` finishes it; finally the old key is gone and its raw value no longer validates.
// Issue 40: `rotate --revoke-old` of two clients whose first key-issuing response is dropped after
// the service committed it (the run settles it by re-reading and re-issues), then SIGKILLed at a
// point after that (lib.ts LOST_AIMS, one in turn); once `apply` converges, no key the rotation
// superseded may be live (the default 7-day overlap is not enough: the user asked for a revoke).
import { mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import {
  aimAndKill,
  aimEnv,
  aimFaults,
  checkInvariant,
  configYaml,
  killAfterLostResponse,
  kmsSync,
  LOST_AIMS,
  lostResponseEnv,
  lostResponseFaults,
  newFigures,
  printedSecrets,
  readSopsStore,
  rng,
  routeTotals,
  supersededLive,
  workspace,
  type DesiredClient,
  type Figures,
  type LostAim,
} from './lib.js';

const API_KEY = 'sk_test_rotaterevoke000000000000';
const ENV = 'crash-production';
export type Mode = 'kill-as-revoke-goes-out' | 'revoke-dropped' | `lost-response:${LostAim}`;
/** One round each, in turn: every window after a lost response gets its kills in a long run. */
export const MODES: Mode[] = [
  'kill-as-revoke-goes-out',
  ...LOST_AIMS.map((a) => `lost-response:${a}` as const),
  'revoke-dropped',
];

export interface RotateRevokeOptions {
  seed: number;
  rounds: number;
  log?: (l: string) => void;
  modes?: Mode[];
}

export async function runRotateRevoke(o: RotateRevokeOptions): Promise<Figures> {
  const log = o.log ?? (() => {});
  const f = newFigures('rotate --revoke-old, revoke lost', o.seed);
  const r = rng(o.seed);
  const ws = workspace('rotate-revoke');
  try {
    const cfg = path.join(ws.dir, 'config');
    mkdirSync(cfg);
    const storeFile = path.join(cfg, '.kms-sync', 'secrets.sops.yaml');
    const emu = await ws.emulator(API_KEY);
    const env = {
      PATH: process.env.PATH,
      HOME: ws.dir,
      NO_COLOR: '1',
      KMS_API_URL: emu.url,
      KMS_API_KEY: API_KEY,
      SOPS_AGE_KEY_FILE: ws.ageKeyFile,
      KMS_SYNC_ALLOW_LOCAL_STORE: '1',
      KMS_SYNC_TEST_TRACE: ws.trace.file,
    };
    const start = (args: string[], extra: Record<string, string> = {}) => {
      f.runs++;
      return kmsSync(args, { cwd: ws.dir, env: { ...env, ...extra }, sink: ws.outputs });
    };
    const run = async (args: string[]) => {
      const p = start(args);
      return { code: await p.exit, out: p.output() };
    };
    const clients: DesiredClient[] = [];
    const issued = new Set<string>();
    const modes = o.modes ?? MODES;
    const lostAims: Record<string, number> = {};
    for (let round = 1; round <= o.rounds; round++) {
      const mode = modes[(round - 1) % modes.length]!;
      if (mode.startsWith('lost-response:')) {
        const aim = mode.slice('lost-response:'.length) as LostAim;
        const problems = await lostResponseRound(round, aim);
        lostAims[aim] = (lostAims[aim] ?? 0) + 1;
        f.failures.push(...problems.map((p) => `round ${round} (${mode}): ${p}`));
        continue;
      }
      const client = `r${round}`;
      clients.push({ name: client, keys: [{ name: 'k1', overlap: false }] });
      writeFileSync(path.join(cfg, 'kms-sync.yaml'), configYaml(clients));
      const setup = await run(['apply', '-f', 'config', '--auto-approve']);
      if (setup.code !== 0) {
        f.failures.push(`round ${round}: setup apply exited ${setup.code}`);
        continue;
      }
      const old = (await emu.liveKeys(ENV)).find((k) => k.client === client)!;
      const oldRaw = (await readSopsStore(storeFile, ws.ageKeyFile))[`${ENV}/${client}/k1`];
      if (!old || !oldRaw) {
        f.failures.push(`round ${round}: setup left no key or no stored value`);
        continue;
      }

      await aimFaults([emu], 'revoke-sent');
      ws.trace.mark();
      const rotate = start(
        ['rotate', '-f', 'config', '--key', `key.${ENV}/${client}/k1`, '--revoke-old', '--auto-approve'],
        mode === 'revoke-dropped' ? {} : aimEnv('revoke-sent'),
      );
      const exited = () => rotate.child.exitCode !== null || rotate.child.signalCode !== null;
      let landed;
      if (mode === 'kill-as-revoke-goes-out') {
        landed = await aimAndKill({
          aim: 'revoke-sent',
          trace: ws.trace,
          emus: [emu],
          r,
          exited,
          victim: () => rotate.child.pid,
          waitMs: 30_000,
        });
        if (landed) {
          f.kills++;
          f.killsByWindow[landed]++;
        }
      }
      const code = await rotate.exit;
      await emu.faults(null);
      for (const k of await emu.liveKeys(ENV)) issued.add(k.id);
      const what = `round ${round} (${mode}${landed ? `, killed in ${landed}` : `, exit ${code}`})`;
      const oldLive = async () => (await emu.liveKeys(ENV)).some((k) => k.id === old.id);
      const problems: string[] = [];
      if (await oldLive()) {
        // The revoke is pending: every report must say so, until an apply finishes it.
        for (const cmd of [
          ['plan', '-f', 'config', '--detailed-exitcode'],
          ['drift', '-f', 'config'],
        ]) {
          const res = await run(cmd);
          if (!(await oldLive())) break; // it finished the revoke itself
          const mentions = res.out.includes(old.id) || res.out.includes(`${client}/k1`);
          if (res.code !== 2 || !mentions)
            problems.push(
              `the old key ${client}/k1 (${old.id}) is still live after the lost revoke, and \`${cmd[0]}\` ${res.code === 0 ? 'says "No changes"' : `exits ${res.code} without naming it`}`,
            );
        }
        const apply = await run(['apply', '-f', 'config', '--auto-approve']);
        if (apply.code !== 0) problems.push(`the next apply exited ${apply.code}`);
        if (await oldLive())
          problems.push(
            `the old key ${client}/k1 (${old.id}) is still live after the next apply: the lost revoke is never finished`,
          );
      }
      if (await emu.validates(ENV, old.clientId, 'k1', oldRaw))
        problems.push(`the old raw value of ${client}/k1 still validates at the service`);
      f.failures.push(...problems.map((p) => `${what}: ${p}`));
      log(`${what}: ${problems.length ? problems.join('; ') : 'ok'}`);
    }
    f.notes.push(
      `rounds with a lost response, per aim: ${
        Object.entries(lostAims)
          .map(([a, n]) => `${a} ${n}`)
          .join(', ') || 'none'
      }`,
    );
    // Strict invariant once all rounds are done (after one more apply, as a user would run).
    await run(['apply', '-f', 'config', '--auto-approve']);
    const plan = await run(['plan', '-f', 'config', '--detailed-exitcode']);
    const stored = await readSopsStore(storeFile, ws.ageKeyFile);
    const wanted = clients.map((c) => ({ client: c.name, key: 'k1', overlap: false, secret: `${ENV}/${c.name}/k1` }));
    const inv = await checkInvariant({
      emu,
      projectEnv: ENV,
      wanted,
      stored,
      reported: plan.code === 2 ? plan.out : '',
    });
    f.keysIssued = issued.size;
    f.keysLost += inv.lost;
    f.strays += inv.strays;
    f.failures.push(...inv.problems.map((p) => `at the end: ${p}`));
    f.failures.push(...printedSecrets(ws.outputs));

    /**
     * Issue 40: `rotate --revoke-old` of two new clients, one request at a time; the first
     * key-issuing response is dropped after the service committed it, then a kill is aimed at
     * `aim`. Once `apply` converges, no key the rotation superseded is live, and the old raw
     * values no longer validate.
     */
    async function lostResponseRound(round: number, aim: LostAim): Promise<string[]> {
      const names = [`r${round}a`, `r${round}b`];
      for (const name of names) clients.push({ name, keys: [{ name: 'k1', overlap: false }] });
      writeFileSync(path.join(cfg, 'kms-sync.yaml'), configYaml(clients));
      const setup = await run(['apply', '-f', 'config', '--auto-approve']);
      if (setup.code !== 0) return [`setup apply exited ${setup.code}`];
      const before = (await emu.liveKeys(ENV)).filter((k) => names.includes(k.client));
      const store = await readSopsStore(storeFile, ws.ageKeyFile);
      const olds = before.map((k) => ({
        id: k.id,
        client: k.client,
        name: k.name,
        clientId: k.clientId,
        raw: store[`${ENV}/${k.client}/k1`],
      }));
      if (olds.length !== names.length || olds.some((x) => !x.raw)) return ['setup left no key or no stored value'];

      await lostResponseFaults([emu], aim);
      ws.trace.mark();
      const totals = await routeTotals([emu]);
      const rotate = start(
        [
          'rotate',
          '-f',
          'config',
          ...names.flatMap((n) => ['--key', `key.${ENV}/${n}/k1`]),
          '--revoke-old',
          '--auto-approve',
          '--parallelism',
          '1',
        ],
        lostResponseEnv(aim),
      );
      const exited = () => rotate.child.exitCode !== null || rotate.child.signalCode !== null;
      const landed = await killAfterLostResponse({
        aim,
        before: totals,
        trace: ws.trace,
        emus: [emu],
        r,
        exited,
        victim: () => rotate.child.pid,
        waitMs: 60_000,
      });
      if (landed) {
        f.kills++;
        f.killsByWindow[landed]++;
      }
      const code = await rotate.exit;
      await emu.faults(null);
      for (const k of await emu.liveKeys(ENV)) issued.add(k.id);
      const problems: string[] = [];
      // A random kill may come after a short run has ended; an aimed one must land.
      if (!landed && aim !== 'random') problems.push(`the kill aimed at ${aim} never landed (rotate exited ${code})`);
      let converged = false;
      for (let attempt = 1; attempt <= 3 && !converged; attempt++)
        converged = (await run(['apply', '-f', 'config', '--auto-approve'])).code === 0;
      if (!converged) problems.push('apply did not converge');
      const live = await emu.liveKeys(ENV);
      for (const k of supersededLive(live, olds)) {
        f.strays++;
        problems.push(
          `STRAY: ${k.client}/${k.name} (${k.id}) was superseded by rotate --revoke-old and is still live after convergence (expires ${k.expiresAt ?? 'never'})`,
        );
      }
      for (const old of olds) {
        if (!live.some((k) => k.id === old.id) && (await emu.validates(ENV, old.clientId, 'k1', old.raw!)))
          problems.push(`the old raw value of ${old.client}/k1 still validates`);
      }
      const plan = await run(['plan', '-f', 'config', '--detailed-exitcode']);
      if (plan.code !== 0) problems.push(`plan after convergence exited ${plan.code}`);
      log(
        `round ${round} (lost-response, then a kill aimed at ${aim}${landed ? `, landed in ${landed}` : `, exit ${code}`}): ${problems.length ? problems.join('; ') : 'ok'}`,
      );
      return problems;
    }
  } finally {
    ws.cleanup();
  }
  return f;
}
