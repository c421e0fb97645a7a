// Scenario (issue 24 b): CI with a committed store. A real git repository holds the configuration
// and its store file (.kms-sync/secrets.sops.yaml, committed); then, with CI=true, `apply` of a
// configuration that needs new keys, and `rotate`, must issue nothing unless told to
// (--allow-local-store or KMS_SYNC_ALLOW_LOCAL_STORE=1): the job would write the new raw values
// into a working copy that is thrown away, while the committed store keeps the old ones. Opted in,
// they issue, and every live key has its raw value in the store. The service's own key count is
// the evidence (no key-issuing request was answered with a key).
import { execFileSync } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import {
  checkInvariant,
  configYaml,
  kmsSync,
  newFigures,
  printedSecrets,
  readSopsStore,
  rng,
  workspace,
  type DesiredClient,
  type Figures,
} from './lib.js';

const API_KEY = 'sk_test_cistore00000000000000000';
const ENV = 'crash-production';

export interface CiStoreOptions {
  seed: number;
  log?: (l: string) => void;
}

export async function runCiStore(o: CiStoreOptions): Promise<Figures> {
  const log = o.log ?? (() => {});
  const f = newFigures('CI, committed store', o.seed);
  const r = rng(o.seed);
  const ws = workspace('ci-store');
  try {
    const repo = path.join(ws.dir, 'repo');
    mkdirSync(repo);
    const git = (...args: string[]) =>
      execFileSync(
        'git',
        ['-c', 'user.name=crash', '-c', 'user.email=crash@example.invalid', '-c', 'commit.gpgsign=false', ...args],
        { cwd: repo, env: { PATH: process.env.PATH, HOME: ws.dir }, stdio: 'pipe' },
      );
    git('init', '-q', '-b', 'main');
    const clients: DesiredClient[] = [{ name: 'c1', keys: [{ name: 'k1', overlap: false }] }];
    const write = () => writeFileSync(path.join(repo, 'kms-sync.yaml'), configYaml(clients));
    write();
    const emu = await ws.emulator(API_KEY);
    const baseEnv = {
      PATH: process.env.PATH,
      HOME: ws.dir,
      NO_COLOR: '1',
      KMS_API_URL: emu.url,
      KMS_API_KEY: API_KEY,
      SOPS_AGE_KEY_FILE: ws.ageKeyFile,
    };
    const run = async (args: string[], env: Record<string, string | undefined>) => {
      f.runs++;
      const p = kmsSync(args, { cwd: repo, env: { ...baseEnv, ...env }, sink: ws.outputs });
      return { code: await p.exit, out: p.output() };
    };
    const keyIds = async () => new Set((await emu.liveKeys(ENV)).map((k) => k.id));
    const storeFile = path.join(repo, '.kms-sync', 'secrets.sops.yaml');

    // On a workstation: the first apply, and the store committed.
    const first = await run(['apply', '--auto-approve'], {});
    if (first.code !== 0) f.failures.push(`the first apply (not CI) failed: ${first.out.slice(-300)}`);
    git('add', 'kms-sync.yaml', '.kms-sync/secrets.sops.yaml');
    git('commit', '-q', '-m', 'keys');
    if (!execFileSync('git', ['ls-files'], { cwd: repo, encoding: 'utf8' }).includes('.kms-sync/secrets.sops.yaml'))
      f.failures.push('setup: the store file is not committed');

    // The configuration grows in a pull request; CI applies it.
    const n = r.int(1, 3);
    for (let i = 0; i < n; i++) clients.push({ name: `c${i + 2}`, keys: [{ name: 'k1', overlap: false }] });
    write();
    git('add', 'kms-sync.yaml');
    git('commit', '-q', '-m', 'more clients');
    const ci = { CI: 'true', GITHUB_ACTIONS: 'true' };
    const refusals: [string, string[]][] = [
      ['apply', ['apply', '--auto-approve']],
      ['rotate', ['rotate', '--key', `key.${ENV}/c1/k1`, '--auto-approve']],
      ['rotate --revoke-old', ['rotate', '--key', `key.${ENV}/c1/k1`, '--revoke-old', '--auto-approve']],
    ];
    for (const [what, args] of refusals) {
      const before = await keyIds();
      const res = await run(args, ci);
      const issued = [...(await keyIds())].filter((id) => !before.has(id));
      f.keysIssued += issued.length;
      if (issued.length)
        f.failures.push(
          `CI=true, store committed, no opt-in: \`${what}\` issued ${issued.length} key(s) (exit ${res.code}) into a working copy CI throws away`,
        );
      else if (res.code === 0 && what === 'apply')
        f.failures.push(
          `CI=true, no opt-in: \`${what}\` exited 0 with keys still to issue (it should refuse and say why)`,
        );
      log(`CI, no opt-in, ${what}: exit ${res.code}, ${issued.length} keys issued`);
    }
    // Opted in (the flag, then the variable): keys issue and land in the store.
    for (const [what, args, env] of [
      ['apply --allow-local-store', ['apply', '--auto-approve', '--allow-local-store'], ci],
      [
        'rotate with KMS_SYNC_ALLOW_LOCAL_STORE=1',
        ['rotate', '--key', `key.${ENV}/c1/k1`, '--revoke-old', '--auto-approve'],
        { ...ci, KMS_SYNC_ALLOW_LOCAL_STORE: '1' },
      ],
    ] as const) {
      if (what.startsWith('apply')) {
        clients.push({ name: 'c9', keys: [{ name: 'k1', overlap: false }] }); // something to issue, whatever the refusals did
        write();
        git('commit', '-q', '-am', 'one more client');
      }
      const before = await keyIds();
      const res = await run([...args], env);
      const issued = [...(await keyIds())].filter((id) => !before.has(id));
      f.keysIssued += issued.length;
      if (res.code !== 0 || issued.length === 0)
        f.failures.push(
          `CI=true, opted in: \`${what}\` exit ${res.code}, ${issued.length} keys issued (expected success with new keys): ${res.out
            .split('\n')
            .filter((l) => /refus|Error/i.test(l))
            .slice(0, 2)
            .join(' | ')}`,
        );
      log(`CI, opted in, ${what}: exit ${res.code}, ${issued.length} keys issued`);
    }
    const plan = await run(['plan', '--detailed-exitcode'], ci);
    const stored = await readSopsStore(storeFile, ws.ageKeyFile);
    const wanted = clients.flatMap((c) =>
      c.keys.map((k) => ({ client: c.name, key: k.name, overlap: false, secret: `${ENV}/${c.name}/${k.name}` })),
    );
    const inv = await checkInvariant({
      emu,
      projectEnv: ENV,
      wanted,
      stored,
      reported: plan.code === 2 ? plan.out : '',
    });
    f.keysLost += inv.lost;
    f.strays += inv.strays;
    f.failures.push(...inv.problems.map((p) => `after the CI runs: ${p}`));
    f.failures.push(...printedSecrets(ws.outputs));
  } finally {
    ws.cleanup();
  }
  return f;
}
