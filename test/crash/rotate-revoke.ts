// Scenario (issue 24 e): `kms-sync rotate --key … --revoke-old` killed as its revoke goes out
// (paused at before-revoke/revoke-sent, the DELETE dropped by the service before it commits), or
// not killed but with every DELETE dropped (the run stops part-way). Until the old key is gone,
// `plan` and `drift` must not say "No changes": they finish the revoke or report it; the next
// `apply` finishes it; finally the old key is gone and its raw value no longer validates.
import { mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import {
  aimAndKill, aimEnv, aimFaults, checkInvariant, configYaml, kmsSync, newFigures, printedSecrets, readSopsStore, rng, workspace,
  type DesiredClient, type Figures,
} from './lib.js';

const API_KEY = 'sk_test_rotaterevoke000000000000';
const ENV = 'crash-production';
type Mode = 'kill-as-revoke-goes-out' | 'revoke-dropped';

export interface RotateRevokeOptions { seed: number; rounds: number; log?: (l: string) => void }

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
      PATH: process.env.PATH, HOME: ws.dir, NO_COLOR: '1', KMS_API_URL: emu.url, KMS_API_KEY: API_KEY, SOPS_AGE_KEY_FILE: ws.ageKeyFile,
      KMS_SYNC_ALLOW_LOCAL_STORE: '1', KMS_SYNC_TEST_TRACE: ws.trace.file,
    };
    const start = (args: string[], extra: Record<string, string> = {}) => {
      f.runs++;
      return kmsSync(args, { cwd: ws.dir, env: { ...env, ...extra }, sink: ws.outputs });
    };
    const run = async (args: string[]) => { const p = start(args); return { code: await p.exit, out: p.output() }; };
    const clients: DesiredClient[] = [];
    const issued = new Set<string>();
    for (let round = 1; round <= o.rounds; round++) {
      const client = `r${round}`;
      clients.push({ name: client, keys: [{ name: 'k1', overlap: false }] });
      writeFileSync(path.join(cfg, 'kms-sync.yaml'), configYaml(clients));
      const setup = await run(['apply', '-f', 'config', '--auto-approve']);
      if (setup.code !== 0) { f.failures.push(`round ${round}: setup apply exited ${setup.code}`); continue; }
      const old = (await emu.liveKeys(ENV)).find((k) => k.client === client)!;
      const oldRaw = (await readSopsStore(storeFile, ws.ageKeyFile))[`${ENV}/${client}/k1`];
      if (!old || !oldRaw) { f.failures.push(`round ${round}: setup left no key or no stored value`); continue; }

      const mode: Mode = r.pick(['kill-as-revoke-goes-out', 'kill-as-revoke-goes-out', 'revoke-dropped'] as const);
      await aimFaults([emu], 'revoke-sent');
      ws.trace.mark();
      const rotate = start(['rotate', '-f', 'config', '--key', `key.${ENV}/${client}/k1`, '--revoke-old', '--auto-approve'], mode === 'revoke-dropped' ? {} : aimEnv('revoke-sent'));
      const exited = () => rotate.child.exitCode !== null || rotate.child.signalCode !== null;
      let landed;
      if (mode === 'kill-as-revoke-goes-out') {
        landed = await aimAndKill({ aim: 'revoke-sent', trace: ws.trace, emus: [emu], r, exited, victim: () => rotate.child.pid, waitMs: 30_000 });
        if (landed) { f.kills++; f.killsByWindow[landed]++; }
      }
      const code = await rotate.exit;
      await emu.faults(null);
      for (const k of await emu.liveKeys(ENV)) issued.add(k.id);
      const what = `round ${round} (${mode}${landed ? `, killed in ${landed}` : `, exit ${code}`})`;
      const oldLive = async () => (await emu.liveKeys(ENV)).some((k) => k.id === old.id);
      const problems: string[] = [];
      if (await oldLive()) {
        // The revoke is pending: every report must say so, until an apply finishes it.
        for (const cmd of [['plan', '-f', 'config', '--detailed-exitcode'], ['drift', '-f', 'config']]) {
          const res = await run(cmd);
          if (!(await oldLive())) break; // it finished the revoke itself
          const mentions = res.out.includes(old.id) || res.out.includes(`${client}/k1`);
          if (res.code !== 2 || !mentions) problems.push(`the old key ${client}/k1 (${old.id}) is still live after the lost revoke, and \`${cmd[0]}\` ${res.code === 0 ? 'says "No changes"' : `exits ${res.code} without naming it`}`);
        }
        const apply = await run(['apply', '-f', 'config', '--auto-approve']);
        if (apply.code !== 0) problems.push(`the next apply exited ${apply.code}`);
        if (await oldLive()) problems.push(`the old key ${client}/k1 (${old.id}) is still live after the next apply: the lost revoke is never finished`);
      }
      if (await emu.validates(ENV, old.clientId, 'k1', oldRaw)) problems.push(`the old raw value of ${client}/k1 still validates at the service`);
      f.failures.push(...problems.map((p) => `${what}: ${p}`));
      log(`${what}: ${problems.length ? problems.join('; ') : 'ok'}`);
    }
    // Strict invariant once all rounds are done (after one more apply, as a user would run).
    await run(['apply', '-f', 'config', '--auto-approve']);
    const plan = await run(['plan', '-f', 'config', '--detailed-exitcode']);
    const stored = await readSopsStore(storeFile, ws.ageKeyFile);
    const wanted = clients.map((c) => ({ client: c.name, key: 'k1', overlap: false, secret: `${ENV}/${c.name}/k1` }));
    const inv = await checkInvariant({ emu, projectEnv: ENV, wanted, stored, reported: plan.code === 2 ? plan.out : '' });
    f.keysIssued = issued.size;
    f.keysLost += inv.lost;
    f.strays += inv.strays;
    f.failures.push(...inv.problems.map((p) => `at the end: ${p}`));
    f.failures.push(...printedSecrets(ws.outputs));
  } finally {
    ws.cleanup();
  }
  return f;
}
