// Scenario (issue 24 a): one configuration folder applied to TWO services — two emulators, two
// API URLs, an sk_test_ then an sk_live_ credential — sharing the default store
// (.kms-sync/secrets.sops.yaml beside the configuration). Their keys share names. After both
// applies (the second one also killed inside a window, then re-run), either every live key of
// BOTH services has its raw value in the store and it validates at its own service, or the second
// apply refused before issuing anything (no key at the second service). Checked with sops-age and
// the services, not with kms-sync's code; `plan` reporting a key does not excuse a lost one here.
import { mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import {
  aimAndKill,
  aimEnv,
  aimFaults,
  AIMS,
  checkInvariant,
  configYaml,
  kmsSync,
  newFigures,
  printedSecrets,
  readSopsStore,
  rng,
  workspace,
  type Aim,
  type DesiredClient,
  type Emulator,
  type Figures,
} from './lib.js';

const TEST_KEY = 'sk_test_twoservices000000000000';
const LIVE_KEY = 'sk_live_twoservices000000000000';
const ENV = 'crash-production';

export interface TwoServicesOptions {
  seed: number;
  rounds: number;
  log?: (l: string) => void;
}

export async function runTwoServices(o: TwoServicesOptions): Promise<Figures> {
  const log = o.log ?? (() => {});
  const f = newFigures('two services, one folder', o.seed);
  const r = rng(o.seed);
  for (let round = 1; round <= o.rounds; round++) {
    const ws = workspace('two-services');
    try {
      const cfg = path.join(ws.dir, 'config');
      mkdirSync(cfg);
      const clients: DesiredClient[] = Array.from({ length: r.int(2, 4) }, (_, i) => ({
        name: `c${i + 1}`,
        keys: Array.from({ length: r.int(1, 2) }, (_, x) => ({ name: `k${x + 1}`, overlap: false })),
      }));
      writeFileSync(path.join(cfg, 'kms-sync.yaml'), configYaml(clients));
      const staging = await ws.emulator(TEST_KEY);
      const production = await ws.emulator(LIVE_KEY);
      const envFor = (emu: Emulator) => ({
        PATH: process.env.PATH,
        HOME: ws.dir,
        NO_COLOR: '1',
        KMS_API_URL: emu.url,
        KMS_API_KEY: emu.apiKey,
        SOPS_AGE_KEY_FILE: ws.ageKeyFile,
        KMS_SYNC_ALLOW_LOCAL_STORE: '1',
        KMS_SYNC_TEST_TRACE: ws.trace.file,
      });
      const apply = (emu: Emulator, extra: Record<string, string> = {}) => {
        f.runs++;
        return kmsSync(['apply', '-f', 'config', '--auto-approve'], {
          cwd: ws.dir,
          env: { ...envFor(emu), ...extra },
          sink: ws.outputs,
        });
      };
      const first = apply(staging);
      if ((await first.exit) !== 0)
        f.failures.push(`round ${round}: the first apply (sk_test_ service) failed: ${first.output().slice(-300)}`);

      // The second service: once killed inside a window (or at random), then applied to the end.
      const aim: Aim = r.pick(AIMS.filter((a) => a !== 'revoke-sent'));
      await aimFaults([production], aim);
      ws.trace.mark();
      const killedRun = apply(production, aimEnv(aim));
      const exited = () => killedRun.child.exitCode !== null || killedRun.child.signalCode !== null;
      const landed = await aimAndKill({
        aim,
        trace: ws.trace,
        emus: [production],
        r,
        exited,
        victim: () => killedRun.child.pid,
      });
      const firstCode = await killedRun.exit;
      await production.faults(null);
      if (landed) {
        f.kills++;
        f.killsByWindow[landed]++;
      }
      // Applied again until it succeeds: a kill cut the run short. A run that ended on its own with
      // nothing live at the second service refused; once the next run refuses the same way (same
      // folder, same store, same service), more runs would only repeat it (they did, 3 more times).
      let code = firstCode;
      let refusals = 0;
      const refusedOnItsOwn = async (c: number | null) =>
        c !== null && c !== 0 && (await production.liveKeys(ENV).catch(() => [])).length === 0;
      if (await refusedOnItsOwn(code)) refusals++;
      for (let attempt = 0; attempt < 4 && code !== 0 && refusals < 2; attempt++) {
        const again = await apply(production).exit;
        refusals = (await refusedOnItsOwn(again)) && again === code ? refusals + 1 : 0;
        code = again;
      }

      const stored = await readSopsStore(path.join(cfg, '.kms-sync', 'secrets.sops.yaml'), ws.ageKeyFile);
      const wanted = clients.flatMap((c) =>
        c.keys.map((k) => ({ client: c.name, key: k.name, overlap: false, secret: `${ENV}/${c.name}/${k.name}` })),
      );
      const atProduction = await production.liveKeys(ENV).catch(() => []);
      f.keysIssued += (await staging.liveKeys(ENV)).length + atProduction.length;
      const problems: string[] = [];
      const refused = code !== 0 && atProduction.length === 0;
      if (code !== 0 && !refused)
        problems.push(
          `the second apply (sk_live_ service) never succeeded, yet ${atProduction.length} keys are live there`,
        );
      for (const [name, emu] of [
        ['sk_test_ service', staging],
        ['sk_live_ service', production],
      ] as const) {
        if (refused && emu === production) continue;
        const inv = await checkInvariant({ emu, projectEnv: ENV, wanted, stored, reported: '', anySecret: true });
        f.keysLost += inv.lost;
        f.strays += inv.strays;
        problems.push(...inv.problems.map((p) => `${name}: ${p}`));
      }
      f.failures.push(
        ...problems.map(
          (p) => `round ${round} (second apply ${landed ? `killed in ${landed}` : `not killed (${aim})`}): ${p}`,
        ),
      );
      log(
        `round ${round}: ${clients.length} clients, second apply ${refused ? 'refused' : `exit ${code}`}${landed ? `, killed in ${landed}` : ''}: ${problems.length ? `${problems.length} problems, first: ${problems[0]}` : 'ok'}`,
      );
      f.failures.push(...printedSecrets(ws.outputs));
    } finally {
      ws.cleanup();
    }
  }
  return f;
}
