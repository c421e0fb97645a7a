// Scenarios (issue 24 c, d): the Terraform front end. The real terraform binary (offline, the
// provider from a filesystem mirror) applies many kms_key resources (5 clients × 4 keys, some
// removed, added back and replaced each iteration) and is SIGKILLed, at random and inside the
// windows — terraform itself, and separately the provider process (dist/provider-bin/terraform-provider-kms.js, its
// child) — then applied again until it succeeds. Then: the live keys are exactly the kms_key
// resources in the state, each one's raw value is in the store and validates at the service, the
// next `terraform plan` is empty, and no provider process outlives terraform. (d) `terraform
// apply -replace=kms_key.x`: the new key validates, the old key is gone and its raw value no
// longer validates. Without terraform (or tofu) on PATH: skipped, loudly.
import { execFileSync } from 'node:child_process';
import { copyFileSync, existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import {
  AIMS,
  aimAndKill,
  aimEnv,
  aimFaults,
  checkInvariant,
  newFigures,
  problemKey,
  printedSecrets,
  processesUnder,
  PROVIDER_BIN,
  readSopsStore,
  rng,
  sleep,
  spawnProc,
  waitFor,
  workspace,
  type Aim,
  type Emulator,
  type Figures,
  type KillWindow,
} from './lib.js';
import {
  findTerraform,
  HCL_REQUIRED_PROVIDER,
  hclProjectEnvironment,
  offlineTerraformEnv,
} from '../support/terraform-offline.js';

const API_KEY = 'sk_test_crashterraform000000000';
const ENV = 'tfcrash-production';
const GRACE_MS = 8000;
const CLIENTS = 5;
const KEYS = 4;
/** The kill windows first, then the random kill. */
const AIM_FIRST: Aim[] = [...AIMS.filter((a) => a !== 'random'), 'random'];

export { findTerraform };

export const SKIP_MESSAGE =
  'SKIPPED: the Terraform crash scenarios: neither terraform nor tofu is on PATH (the apply/rotate campaign and the other scenarios still ran)';

function mainTf(keys: Set<string>): string {
  const out = [
    `${HCL_REQUIRED_PROVIDER}
provider "kms" {}
${hclProjectEnvironment({ slug: 'tfcrash', name: 'TF crash', type: 'production', url: 'https://api.tfcrash.example' })}
resource "kms_template" "t" {
  project_env    = kms_environment.e.project_env
  name           = "std"
  rate_limit_day = 100000
  max_clients    = 100
}
resource "kms_endpoint" "orders" {
  project_env = kms_environment.e.project_env
  method      = "GET"
  path        = "/v1/orders"
  name        = "Orders"
}
`,
  ];
  for (let c = 1; c <= CLIENTS; c++)
    out.push(
      `resource "kms_client" "c${c}" {\n  project_env = kms_environment.e.project_env\n  name        = "c${c}"\n  template    = kms_template.t.name\n}\n`,
    );
  for (const k of [...keys].sort()) {
    const [c, name] = k.split('_') as [string, string];
    out.push(
      `resource "kms_key" "${k}" {\n  project_env = kms_client.${c}.project_env\n  client      = kms_client.${c}.name\n  name        = "${name}"\n  lifecycle {\n    create_before_destroy = true\n  }\n}\n`,
    );
  }
  return out.join('');
}

export interface TerraformOptions {
  seed: number;
  iterations: number;
  log?: (l: string) => void;
}

/** How Terraform lost track of what it applied, before an apply (issue 41). */
export type StateLoss = 'state-rm' | 'truncated' | 'backup';

export interface TerraformReport extends Figures {
  killedTerraform: number;
  killedProvider: number;
  replaceChecks: number;
  /** Applies after a lost track of objects: `terraform state rm`, a state cut to 0 bytes, the `.backup` put back. */
  stateLosses: Record<StateLoss, number>;
  /** Keys those applies issued: 0 when every resource's key was held (adopted, not replaced). */
  issuedAfterLoss: number;
}

export async function runTerraform(o: TerraformOptions): Promise<TerraformReport> {
  const f: TerraformReport = {
    ...newFigures('terraform apply, killed', o.seed),
    killedTerraform: 0,
    killedProvider: 0,
    replaceChecks: 0,
    stateLosses: { 'state-rm': 0, truncated: 0, backup: 0 },
    issuedAfterLoss: 0,
  };
  const bin = findTerraform();
  if (!bin) {
    f.skipped = SKIP_MESSAGE;
    return f;
  }
  const log = o.log ?? (() => {});
  const r = rng(o.seed);
  const ws = workspace('tf-crash');
  const providerPids = () => processesUnder(ws.dir, PROVIDER_BIN);
  try {
    const emu = await ws.emulator(API_KEY);
    const { work, env } = offlineSetup(ws.dir, emu, ws.ageKeyFile, ws.trace.file);
    const tf = (args: string[], extra: Record<string, string> = {}) => {
      f.runs++;
      return spawnProc(bin, [...args, '-no-color', '-input=false'], {
        cwd: work,
        env: { ...env, ...extra },
        sink: ws.outputs,
      });
    };
    const storeFile = path.join(work, '.kms-sync', 'secrets.sops.yaml');
    const keys = new Set<string>();
    for (let c = 1; c <= CLIENTS; c++) for (let k = 1; k <= KEYS; k++) keys.add(`c${c}_k${k}`);
    writeFileSync(path.join(work, 'main.tf'), mainTf(keys));
    const init = tf(['init']);
    if ((await init.exit) !== 0) throw new Error(`terraform init failed: ${init.output().slice(-500)}`);
    const issued = new Set<string>();
    const observe = async () => {
      for (const k of await emu.liveKeys(ENV).catch(() => [])) issued.add(k.id);
    };
    const problemsSeen = new Set<string>(); // a key that stays wrong is reported once, where it was first seen
    const countedIds = new Set<string>();

    const noProviderOutlives = async (what: string) => {
      // Terraform is gone: its provider must follow, within a few seconds (a paused one included).
      const gone = await waitFor(() => providerPids().length === 0, GRACE_MS);
      if (!gone) {
        const left = providerPids();
        f.failures.push(
          `${what}: ${left.length} provider process(es) outlived terraform by ${GRACE_MS / 1000} s (${left.join(', ')})`,
        );
        for (const pid of left)
          try {
            process.kill(pid, 'SIGKILL');
          } catch {
            /* gone */
          }
      }
    };
    let applyMs = 4000; // how long an apply takes here (moving average), so that random kills land inside runs
    const converge = async (what: string): Promise<boolean> => {
      for (let attempt = 1; attempt <= 5; attempt++) {
        const t = Date.now();
        const p = tf(['apply', '-auto-approve']);
        const code = await p.exit;
        applyMs = Math.round(applyMs * 0.7 + (Date.now() - t) * 0.3);
        await noProviderOutlives(`${what}, re-apply ${attempt}`);
        if (code === 0) return true;
        log(
          `  re-apply ${attempt} exited ${code}: ${p
            .output()
            .split('\n')
            .filter((l) => /Error/.test(l))
            .slice(0, 2)
            .join(' | ')}`,
        );
      }
      return false;
    };
    const verify = async (what: string) => {
      const problems: string[] = [];
      const state = JSON.parse(readFileSync(path.join(work, 'terraform.tfstate'), 'utf8'));
      const inState = new Map<string, string>(); // resource name → key id
      for (const res of state.resources ?? [])
        if (res.type === 'kms_key')
          for (const inst of res.instances ?? []) inState.set(res.name, inst.attributes.key_id);
      if (inState.size !== keys.size)
        problems.push(`${inState.size} kms_key instances in the state, ${keys.size} in the configuration`);
      const stored = await readSopsStore(storeFile, ws.ageKeyFile);
      // Live keys == kms_key resources: the tracked generation holds its raw value, nothing else is live.
      const wanted = [...keys].map((k) => {
        const [c, n] = k.split('_') as [string, string];
        return {
          client: c,
          key: n,
          overlap: false,
          secret: `${ENV}/${c}/${n}`,
          ...(inState.has(k) ? { id: inState.get(k)! } : {}),
        };
      });
      const inv = await checkInvariant({ emu, projectEnv: ENV, wanted, stored, reported: '' });
      f.keysLost += inv.lostIds.filter((id) => !countedIds.has(id)).length;
      f.strays += inv.strayIds.filter((id) => !countedIds.has(id)).length;
      for (const id of [...inv.lostIds, ...inv.strayIds]) countedIds.add(id);
      problems.push(...inv.problems);
      const plan = tf(['plan', '-detailed-exitcode']);
      const code = await plan.exit;
      await noProviderOutlives(`${what}, plan`);
      if (code !== 0)
        problems.push(
          `terraform plan after convergence exited ${code}: ${plan
            .output()
            .split('\n')
            .filter((l) => /# kms_|Plan:|Error/.test(l))
            .slice(0, 4)
            .join(' | ')}`,
        );
      return problems;
    };

    if (!(await converge('initial apply'))) f.failures.push('the initial terraform apply did not succeed');
    await observe();
    // (d) -replace, on the clean state of the first apply: the old key no longer validates, the new one does.
    for (const k of [r.pick([...keys]), r.pick([...keys])]) {
      const [c, n] = k.split('_') as [string, string];
      const tracked = trackedKeyId(path.join(work, 'terraform.tfstate'), k);
      const oldRaw = (await readSopsStore(storeFile, ws.ageKeyFile))[`${ENV}/${c}/${n}`];
      const p = tf(['apply', '-auto-approve', `-replace=kms_key.${k}`]);
      const code = await p.exit;
      await noProviderOutlives(`-replace=kms_key.${k}`);
      await observe();
      f.replaceChecks++;
      const problems: string[] = [];
      if (code !== 0) problems.push(`exited ${code}`);
      const after = (await emu.liveKeys(ENV)).filter((x) => x.client === c && x.name === n);
      const newRaw = (await readSopsStore(storeFile, ws.ageKeyFile))[`${ENV}/${c}/${n}`];
      if (tracked && after.some((x) => x.id === tracked))
        problems.push(`the old key ${tracked} (the one the state tracked) is still live`);
      if (tracked && trackedKeyId(path.join(work, 'terraform.tfstate'), k) === tracked)
        problems.push('the state still tracks the old key');
      if (oldRaw && (await validatesAnywhere(emu, c, n, oldRaw))) problems.push('the old raw value still validates');
      if (!newRaw || newRaw === oldRaw || !(await validatesAnywhere(emu, c, n, newRaw)))
        problems.push('the store holds no new raw value that validates');
      f.failures.push(...problems.map((x) => `terraform apply -replace=kms_key.${k}: ${x}`));
      log(`-replace=kms_key.${k}: ${problems.length ? problems.join('; ') : 'ok'}`);
    }
    for (let it = 1; it <= o.iterations; it++) {
      // Churn: remove or add back some keys, replace some others.
      for (let i = r.int(0, 2); i > 0; i--) {
        const k = `c${r.int(1, CLIENTS)}_k${r.int(1, KEYS)}`;
        if (keys.has(k) && keys.size > 8) keys.delete(k);
        else keys.add(k);
      }
      writeFileSync(path.join(work, 'main.tf'), mainTf(keys));
      const replace = Array.from({ length: r.int(1, 4) }, () => r.pick([...keys])).filter(
        (k, i, all) => all.indexOf(k) === i,
      );
      // Every aim once first, the windows before the random kill (the victim alternating), so that
      // even a short run (npm test's 4 iterations) reaches each window with both victims.
      const aim: Aim = it <= AIM_FIRST.length ? AIM_FIRST[it - 1]! : r.pick(AIMS);
      const victimKind =
        it <= AIM_FIRST.length ? (it % 2 ? 'provider' : 'terraform') : r.next() < 0.5 ? 'terraform' : 'provider';
      await aimFaults([emu], aim);
      const stateFile = path.join(work, 'terraform.tfstate');
      const stateBefore = readFileSync(stateFile, 'utf8');
      ws.trace.mark();
      const p = tf(['apply', '-auto-approve', ...replace.map((k) => `-replace=kms_key.${k}`)], aimEnv(aim));
      const exited = () => p.child.exitCode !== null || p.child.signalCode !== null;
      const victim = () => (victimKind === 'terraform' ? p.child.pid : providerPids().at(-1));
      const landed: KillWindow | undefined = await aimAndKill({
        aim,
        trace: ws.trace,
        emus: [emu],
        r,
        exited,
        victim,
        randomMs: [300, Math.max(1000, applyMs)],
        waitMs: 60_000,
      });
      const code = await p.exit;
      await emu.faults(null);
      if (landed) {
        f.kills++;
        f.killsByWindow[landed]++;
        if (victimKind === 'terraform') f.killedTerraform++;
        else f.killedProvider++;
      }
      const what = `iteration ${it} (${aim}, ${landed ? `${victimKind} killed in ${landed}` : `not killed, exit ${code}`})`;
      // Terraform's local backend rewrites terraform.tfstate in place: a SIGKILL during that write
      // leaves it empty or cut. That is Terraform's, not the provider's; a remote backend would keep
      // the last state, so put the one from before this apply back (the keys the killed apply made
      // are then tracked by nothing, which the provider must handle) and note it.
      if (!stateReadable(stateFile)) {
        writeFileSync(stateFile, stateBefore);
        f.notes.push(`${what}: terraform.tfstate was cut by the kill; the state from before this apply was put back`);
        log(`  ${what}: terraform.tfstate cut by the kill, previous state put back`);
      }
      await noProviderOutlives(what);
      await sleep(50);
      await observe();
      const problems: string[] = [];
      if (!(await converge(what))) problems.push('terraform apply did not succeed again within 5 attempts');
      await observe();
      problems.push(...(await verify(what)));
      const fresh = problems.filter((x) => !problemsSeen.has(problemKey(x)));
      for (const x of problems) problemsSeen.add(problemKey(x));
      f.failures.push(...fresh.map((x) => `${what}: ${x}`));
      log(`${what}: ${problems.length ? `${problems.length} problems, first: ${problems[0]}` : 'ok'}`);

      // Then Terraform loses track of what it applied, as a user's recovery paths do (issue 41):
      // `terraform state rm` of some keys and a client, a state cut to 0 bytes (a SIGKILL during
      // the local backend's write), or the `.backup` of the last apply put back. The next apply must
      // converge with one live key per resource, its raw value held, and nothing else live.
      const loss: StateLoss = (['state-rm', 'truncated', 'backup'] as const)[(it - 1) % 3]!;
      if (loss === 'state-rm') {
        const gone = [...new Set(Array.from({ length: r.int(1, 3) }, () => `kms_key.${r.pick([...keys])}`))];
        if (r.next() < 0.5) gone.push(`kms_client.c${r.int(1, CLIENTS)}`);
        f.runs++;
        const rm = spawnProc(bin, ['state', 'rm', ...gone], { cwd: work, env, sink: ws.outputs });
        if ((await rm.exit) !== 0)
          f.failures.push(`${what}: terraform state rm ${gone.join(' ')} failed: ${rm.output().slice(-300)}`);
      } else if (loss === 'truncated') {
        writeFileSync(stateFile, '');
      } else {
        const backup = `${stateFile}.backup`;
        if (existsSync(backup) && stateReadable(backup)) copyFileSync(backup, stateFile);
      }
      f.stateLosses[loss]++;
      const lossWhat = `iteration ${it}, after ${loss}`;
      await observe();
      const liveBefore = new Set((await emu.liveKeys(ENV)).map((k) => k.id));
      const lossProblems: string[] = [];
      if (!(await converge(lossWhat))) lossProblems.push('terraform apply did not succeed again within 5 attempts');
      await observe();
      // Every resource's key was live and held (verified above): the apply adopts them, issuing none.
      const reissued = (await emu.liveKeys(ENV)).filter((k) => !liveBefore.has(k.id));
      f.issuedAfterLoss += reissued.length;
      if (problems.length === 0 && reissued.length)
        lossProblems.push(
          `${reissued.length} key(s) issued (${reissued.map((k) => `${k.client}/${k.name}`).join(', ')}) where the held key should have been adopted`,
        );
      lossProblems.push(...(await verify(lossWhat)));
      const freshLoss = lossProblems.filter((x) => !problemsSeen.has(problemKey(x)));
      for (const x of lossProblems) problemsSeen.add(problemKey(x));
      f.failures.push(...freshLoss.map((x) => `${lossWhat}: ${x}`));
      log(`${lossWhat}: ${lossProblems.length ? `${lossProblems.length} problems, first: ${lossProblems[0]}` : 'ok'}`);
    }

    f.keysIssued = issued.size;
    f.failures.push(...printedSecrets(ws.outputs));
    const state = readFileSync(path.join(work, 'terraform.tfstate'), 'utf8');
    if (/kmsc_[A-Za-z0-9_-]{20,}/.test(state)) f.failures.push('a raw key is in terraform.tfstate');
  } finally {
    for (const pid of providerPids())
      try {
        process.kill(pid, 'SIGKILL');
      } catch {
        /* gone */
      }
    ws.cleanup();
  }
  return f;
}

/** The provider in a filesystem mirror, installed offline (test/support/terraform-offline.js), and a working directory. */
function offlineSetup(root: string, emu: Emulator, ageKeyFile: string, traceFile: string) {
  const env = offlineTerraformEnv({
    root,
    providerBin: PROVIDER_BIN,
    service: emu,
    ageKeyFile,
    extra: { KMS_SYNC_TEST_TRACE: traceFile },
  });
  const work = path.join(root, 'work');
  mkdirSync(work);
  return { work, env };
}

/**
 * Scenario (issue 24 b) through the provider: a git repository holds main.tf and the committed
 * store; with CI=true, `terraform apply` of more keys must issue nothing unless
 * KMS_SYNC_ALLOW_LOCAL_STORE=1; opted in, the keys issue and are held.
 */
export async function runTerraformCi(o: { seed: number; log?: (l: string) => void }): Promise<Figures> {
  const f = newFigures('terraform, CI, committed store', o.seed);
  const bin = findTerraform();
  if (!bin) {
    f.skipped = SKIP_MESSAGE;
    return f;
  }
  const log = o.log ?? (() => {});
  const ws = workspace('tf-ci');
  try {
    const emu = await ws.emulator(API_KEY);
    const { work, env } = offlineSetup(ws.dir, emu, ws.ageKeyFile, ws.trace.file);
    const git = (...args: string[]) =>
      execFileSync(
        'git',
        ['-c', 'user.name=crash', '-c', 'user.email=crash@example.invalid', '-c', 'commit.gpgsign=false', ...args],
        { cwd: work, env: { PATH: process.env.PATH, HOME: ws.dir }, stdio: 'pipe' },
      );
    const tf = async (args: string[], extra: Record<string, string> = {}) => {
      f.runs++;
      const p = spawnProc(bin, [...args, '-no-color', '-input=false'], {
        cwd: work,
        env: { ...env, ...extra },
        sink: ws.outputs,
      });
      return { code: await p.exit, out: p.output() };
    };
    const keys = new Set(['c1_k1', 'c2_k1']);
    writeFileSync(path.join(work, 'main.tf'), mainTf(keys));
    git('init', '-q', '-b', 'main');
    if ((await tf(['init'])).code !== 0) throw new Error('terraform init failed');
    const first = await tf(['apply', '-auto-approve']);
    if (first.code !== 0) f.failures.push(`the first terraform apply (not CI) failed: ${first.out.slice(-300)}`);
    git('add', 'main.tf', '.kms-sync/secrets.sops.yaml', 'terraform.tfstate', '.terraform.lock.hcl');
    git('commit', '-q', '-m', 'keys');
    const ids = async () => new Set((await emu.liveKeys(ENV)).map((k) => k.id));
    keys.add('c3_k1');
    keys.add('c4_k2');
    writeFileSync(path.join(work, 'main.tf'), mainTf(keys));
    git('commit', '-q', '-am', 'more keys');
    for (const [what, extra, mustIssue] of [
      ['CI=true, no opt-in', { CI: 'true', GITHUB_ACTIONS: 'true' }, false],
      [
        'CI=true, KMS_SYNC_ALLOW_LOCAL_STORE=1',
        { CI: 'true', GITHUB_ACTIONS: 'true', KMS_SYNC_ALLOW_LOCAL_STORE: '1' },
        true,
      ],
    ] as const) {
      if (mustIssue) {
        keys.add('c5_k3'); // something to issue, whatever the refusal did
        writeFileSync(path.join(work, 'main.tf'), mainTf(keys));
        git('commit', '-q', '-am', 'one more key');
      }
      const before = await ids();
      const res = await tf(['apply', '-auto-approve'], extra);
      const issued = [...(await ids())].filter((id) => !before.has(id));
      f.keysIssued += issued.length;
      if (!mustIssue && issued.length)
        f.failures.push(
          `${what}: terraform apply issued ${issued.length} key(s) (exit ${res.code}) into a working copy CI throws away`,
        );
      if (mustIssue && (res.code !== 0 || issued.length === 0))
        f.failures.push(
          `${what}: terraform apply exit ${res.code}, ${issued.length} keys issued (expected success with new keys)`,
        );
      log(`terraform, ${what}: exit ${res.code}, ${issued.length} keys issued`);
    }
    const stored = await readSopsStore(path.join(work, '.kms-sync', 'secrets.sops.yaml'), ws.ageKeyFile);
    const state = JSON.parse(readFileSync(path.join(work, 'terraform.tfstate'), 'utf8'));
    const tracked = new Map<string, string>();
    for (const res of state.resources ?? [])
      if (res.type === 'kms_key') tracked.set(res.name, res.instances?.[0]?.attributes?.key_id);
    const wanted = [...keys].map((k) => {
      const [c, n] = k.split('_') as [string, string];
      return {
        client: c,
        key: n,
        overlap: false,
        secret: `${ENV}/${c}/${n}`,
        ...(tracked.get(k) ? { id: tracked.get(k)! } : {}),
      };
    });
    const inv = await checkInvariant({ emu, projectEnv: ENV, wanted, stored, reported: '' });
    f.keysLost += inv.lost;
    f.strays += inv.strays;
    f.failures.push(...inv.problems.map((p) => `after the CI runs: ${p}`));
    f.failures.push(...printedSecrets(ws.outputs));
  } finally {
    for (const pid of processesUnder(ws.dir, PROVIDER_BIN))
      try {
        process.kill(pid, 'SIGKILL');
      } catch {
        /* gone */
      }
    ws.cleanup();
  }
  return f;
}

function trackedKeyId(stateFile: string, resource: string): string | undefined {
  const state = JSON.parse(readFileSync(stateFile, 'utf8'));
  return state.resources?.find((r: { type: string; name: string }) => r.type === 'kms_key' && r.name === resource)
    ?.instances?.[0]?.attributes?.key_id;
}

function stateReadable(file: string): boolean {
  try {
    const state = JSON.parse(readFileSync(file, 'utf8'));
    return (state.resources ?? []).some((r: { type: string }) => r.type === 'kms_project');
  } catch {
    return false;
  }
}

async function validatesAnywhere(emu: Emulator, client: string, name: string, raw: string): Promise<boolean> {
  const c = (await emu.clients(ENV)).find((x) => x.name === client);
  return c ? emu.validates(ENV, c.id, name, raw) : false;
}
