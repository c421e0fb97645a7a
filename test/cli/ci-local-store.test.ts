// In CI a local store file is where keys go to die: the runner is discarded when the job ends, with
// the new raw keys in it, whether or not git tracks the file. So `apply` and `rotate` with CI set
// refuse, before any key is issued, to issue keys into a local store file, committed or not, unless
// the user opts in (--allow-local-store, KMS_SYNC_ALLOW_LOCAL_STORE=1 or settings.allowLocalStoreInCi);
// an opted-in run ends by naming the file to commit and push. Real processes: the CLI, the emulator, git.
import { execFile, execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, rmSync } from 'node:fs';
import path from 'node:path';
import { Ajv } from 'ajv';
import addFormatsModule from 'ajv-formats';
import { afterAll, afterEach, beforeEach, describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { allOutput, RAW_KEY_PATTERN, repoRoot, runCli, writeFiles } from '../support/cli.js';
import { setup, smallConfig, type Setup } from './helpers.js';
import { skipTest } from '../support/skip.js';
import { patient, waitFor } from '../support/patience.js';

const STORE = '.kms-sync/secrets.sops.yaml';
const addFormats = (addFormatsModule as unknown as { default: (a: Ajv) => Ajv }).default;
const ajv = new Ajv({ allErrors: true, strict: false });
addFormats(ajv);
const validateEvent = ajv.compile(
  JSON.parse(readFileSync(path.join(repoRoot, 'schemas', 'kms-sync-apply-events.schema.json'), 'utf8')),
);
/** The small configuration plus one more client (one more key to issue). */
const withClient = (name: string, extra = '') =>
  `${extra}${smallConfig.replace('{ name: app, template: std, keys: [{ name: main }] }', `{ name: app, template: std, keys: [{ name: main }] }, { name: ${name}, template: std, keys: [{ name: main }] }`)}`;

let s: Setup;
/** The workspace and emulator of the running test, if it has one (removed after it). */
let live: Setup | undefined;
const git = (...args: string[]) =>
  execFileSync(
    'git',
    ['-C', s.dir, '-c', 'user.name=kms-sync test', '-c', 'user.email=test@example.invalid', ...args],
    { encoding: 'utf8' },
  );
const ci = (extra: NodeJS.ProcessEnv = {}) => ({ ...s.env, CI: 'true', ...extra });
const clientNamed = async (name: string) => {
  const r = (await (
    await fetch(`${s.emu.url}/client?project_env=shop-staging&name=${name}`, {
      headers: { 'x-api-key': s.env.KMS_API_KEY! },
    })
  ).json()) as { data?: unknown[] };
  return r.data?.[0];
};
/** Requests that write something in the service, except the run lock's own record (an endpoint). */
const writes = () =>
  Object.entries(s.emu.counts())
    .filter(([route]) => !route.startsWith('GET ') && !route.includes('/endpoint'))
    .map(([route]) => route);
const lastLines = (text: string, n: number) => text.trimEnd().split('\n').slice(-n).join('\n');

/** A configuration in git whose store file, with the first keys in it, is committed (only for the tests that run the CLI). */
async function applied() {
  s = await setup();
  live = s;
  git('init', '-q', '-b', 'main');
  const first = await runCli(['apply', '--yes'], { cwd: s.dir, env: s.env });
  expect(first.code, first.stderr).toBe(0);
  git('add', 'kms-sync.yaml', STORE);
  git('commit', '-q', '-m', 'configuration and its store');
  expect(git('ls-files', STORE).trim()).toBe(STORE);
}
afterEach(async () => {
  await live?.emu.close();
  if (live?.dir) rmSync(live.dir, { recursive: true, force: true });
  live = undefined;
});
afterAll(() => {
  for (const text of allOutput) expect(text).not.toMatch(RAW_KEY_PATTERN);
});

describe('CI and a local store file', () => {
  beforeEach(applied);

  it('refuses, in CI, to issue keys into a COMMITTED store file: nothing issued, both ways out named', async () => {
    writeFiles(s.dir, { 'kms-sync.yaml': withClient('billing') });
    const storeBefore = readFileSync(path.join(s.dir, STORE));
    s.emu.resetCounts();
    const r = await runCli(['apply', '--yes'], { cwd: s.dir, env: ci() });
    expect(r.code, r.stdout + r.stderr).toBe(1);
    expect(r.stderr).toContain(`refusing to issue 1 new key(s) into the local store file ${STORE}`);
    expect(r.stderr).toContain('whether or not git tracks the file');
    expect(r.stderr).toMatch(/declare a remote secret store under stores: \(vault:\/\/, aws-sm:\/\//);
    expect(r.stderr).toMatch(/workflow step after apply that commits and pushes it/);
    expect(r.stderr).toContain('--allow-local-store');
    expect(r.stderr).toContain('KMS_SYNC_ALLOW_LOCAL_STORE=1');
    expect(r.stderr).toContain('settings: { allowLocalStoreInCi: true }');
    // Nothing issued: no client or key was created, the store and journal are untouched. (The run
    // lock's record, an endpoint created and deleted around the plan, is the only write.)
    expect(await clientNamed('billing')).toBeUndefined();
    expect(writes()).toEqual([]);
    expect(readFileSync(path.join(s.dir, STORE)).equals(storeBefore)).toBe(true);
    expect(existsSync(path.join(s.dir, '.kms-sync', 'journal'))).toBe(false);
    expect(git('status', '--porcelain', '--', STORE)).toBe('');
    // The plan-only commands are unaffected.
    const plan = await runCli(['plan', '--detailed-exitcode'], { cwd: s.dir, env: ci() });
    expect(plan.code, plan.stderr).toBe(2);
    expect(plan.stderr).not.toContain('refusing');
  });

  it('rotate in CI is refused the same way, and allowed with --allow-local-store', async () => {
    const before = (await clientNamed('web')) as { keys: { id: string }[] };
    const refused = await runCli(['rotate', '--key', 'key.shop-staging/web/main', '--yes'], { cwd: s.dir, env: ci() });
    expect(refused.code, refused.stdout + refused.stderr).toBe(1);
    expect(refused.stderr).toContain(`refusing to issue 1 new key(s) into the local store file ${STORE}`);
    expect(((await clientNamed('web')) as { keys: { id: string }[] }).keys.map((k) => k.id)).toEqual(
      before.keys.map((k) => k.id),
    );
    const allowed = await runCli(['rotate', '--key', 'key.shop-staging/web/main', '--yes', '--allow-local-store'], {
      cwd: s.dir,
      env: ci(),
    });
    expect(allowed.code, allowed.stdout + allowed.stderr).toBe(0);
    expect(((await clientNamed('web')) as { keys: unknown[] }).keys.length).toBeGreaterThan(before.keys.length);
    expect(lastLines(allowed.stdout, 2)).toContain(
      `kms-sync wrote 1 new key(s) into ${STORE} on this CI runner: commit and push it`,
    );
  });

  it('--allow-local-store: issues, and the last lines name the file to commit and push', async () => {
    writeFiles(s.dir, { 'kms-sync.yaml': withClient('billing') });
    const r = await runCli(['apply', '--yes', '--allow-local-store'], {
      cwd: s.dir,
      env: ci({ GITHUB_ACTIONS: 'true' }),
    });
    expect(r.code, r.stdout + r.stderr).toBe(0);
    expect(await clientNamed('billing')).toBeDefined();
    expect(lastLines(r.stdout, 2)).toContain(
      `kms-sync wrote 1 new key(s) into ${STORE} on this CI runner: commit and push it, nothing else keeps them; the runner is discarded when the job ends.`,
    );
    // In GitHub Actions also a warning annotation, shown on the run's page.
    expect(r.stderr).toContain(
      `::warning title=kms-sync: commit and push::kms-sync wrote 1 new key(s) into ${STORE} on this CI runner`,
    );
    expect(git('status', '--porcelain', '--', STORE).trim()).toBe(`M ${STORE}`);
  });

  it('KMS_SYNC_ALLOW_LOCAL_STORE=1 with --json: the summary (last line) has commit_required', async () => {
    writeFiles(s.dir, { 'kms-sync.yaml': withClient('billing') });
    const r = await runCli(['apply', '--yes', '--json'], { cwd: s.dir, env: ci({ KMS_SYNC_ALLOW_LOCAL_STORE: '1' }) });
    expect(r.code, r.stderr).toBe(0);
    expect(await clientNamed('billing')).toBeDefined();
    const events = r.stdout
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l));
    const last = events.at(-1);
    expect(last.type).toBe('apply_summary');
    for (const e of events) expect(validateEvent(e), JSON.stringify(validateEvent.errors)).toBe(true);
    expect(last.commit_required).toEqual({
      files: [{ file: STORE, keys: 1 }],
      message: expect.stringContaining(`into ${STORE} on this CI runner: commit and push it`),
    });
    expect(lastLines(r.stderr, 3)).toContain(`kms-sync wrote 1 new key(s) into ${STORE}`);
  });

  it('a store write that fails after the key was journaled: the last lines name the journal to commit and push', async () => {
    writeFiles(s.dir, { 'kms-sync.yaml': withClient('billing') });
    const trace = path.join(s.dir, 'trace.txt');
    const storeFile = path.join(s.dir, STORE);
    // Held just after the raw key is journaled; meanwhile the store file becomes a folder, so the store write fails.
    const running = runCli(['apply', '--yes', '--allow-local-store'], {
      cwd: s.dir,
      env: ci({ KMS_SYNC_TEST_PAUSE: `after-journal:${patient(1500)}`, KMS_SYNC_TEST_TRACE: trace }),
    });
    expect(
      await waitFor(() => existsSync(trace) && readFileSync(trace, 'utf8').includes('after-journal'), 30_000),
      'the raw key was journaled',
    ).toBe(true);
    rmSync(storeFile);
    mkdirSync(storeFile);
    const r = await running;
    expect(r.code, r.stdout + r.stderr).toBe(3);
    expect(existsSync(path.join(s.dir, '.kms-sync', 'journal'))).toBe(true);
    expect(lastLines(r.stdout, 2)).toContain(
      'kms-sync left its key journal .kms-sync/journal on this CI runner (keys not yet in their store; age-encrypted): commit and push it too',
    );
    expect(r.stdout).not.toContain(`new key(s) into ${STORE}`);
  });

  it('settings.allowLocalStoreInCi in the configuration opts in, also for a saved plan', async () => {
    writeFiles(s.dir, { 'kms-sync.yaml': withClient('billing', 'settings: { allowLocalStoreInCi: true }\n') });
    const r = await runCli(['apply', '--yes'], { cwd: s.dir, env: ci() });
    expect(r.code, r.stdout + r.stderr).toBe(0);
    expect(await clientNamed('billing')).toBeDefined();
    expect(lastLines(r.stdout, 2)).toContain(`kms-sync wrote 1 new key(s) into ${STORE} on this CI runner`);
    // A plan saved from that configuration carries the setting to `apply plan.json`.
    writeFiles(s.dir, { 'kms-sync.yaml': withClient('ledger', 'settings: { allowLocalStoreInCi: true }\n') });
    const saved = await runCli(['plan', '--out', 'plan.json'], { cwd: s.dir, env: ci() });
    expect(saved.code, saved.stderr).toBe(0);
    const applied = await runCli(['apply', 'plan.json'], { cwd: s.dir, env: ci() });
    expect(applied.code, applied.stdout + applied.stderr).toBe(0);
    expect(await clientNamed('ledger')).toBeDefined();
    expect(lastLines(applied.stdout, 2)).toContain(`kms-sync wrote 1 new key(s) into ${STORE}`);
  });

  it('outside CI nothing changes: keys are issued into the committed file, no commit reminder', async () => {
    writeFiles(s.dir, { 'kms-sync.yaml': withClient('billing') });
    const r = await runCli(['apply', '--yes'], { cwd: s.dir, env: { ...s.env, CI: 'false' } });
    expect(r.code, r.stdout + r.stderr).toBe(0);
    expect(await clientNamed('billing')).toBeDefined();
    expect(r.stdout + r.stderr).not.toContain('commit and push');
    // In CI, an apply that issues no key (nothing to do) is not refused either.
    const again = await runCli(['apply', '--yes'], { cwd: s.dir, env: ci() });
    expect(again.code, again.stdout + again.stderr).toBe(0);
    expect(again.stdout + again.stderr).not.toContain('refusing');
  });

  it('a bad settings value, or two files that disagree, is an error naming file:line', async () => {
    writeFiles(s.dir, { 'kms-sync.yaml': `settings:\n  allowLocalStoreInCi: "yes"\n${smallConfig}` });
    const bad = await runCli(['validate'], { cwd: s.dir, env: s.env });
    expect(bad.code).toBe(1);
    expect(bad.stderr).toMatch(/kms-sync\.yaml:2:\d+.*allowLocalStoreInCi/);
    writeFiles(s.dir, {
      'config/a.yaml': `settings: { allowLocalStoreInCi: true }\n${smallConfig}`,
      'config/b.yaml': 'apiVersion: kms-sync/v1\nsettings:\n  allowLocalStoreInCi: false\n',
    });
    const two = await runCli(['validate', '-f', 'config'], { cwd: s.dir, env: s.env });
    expect(two.code).toBe(1);
    expect(two.stderr).toMatch(/b\.yaml:3:\d+.*settings\.allowLocalStoreInCi is false here but true at .*a\.yaml:1/);
  });
});

describe('the example CI workflows keep the keys', () => {
  const read = (rel: string) => parse(readFileSync(path.join(repoRoot, rel), 'utf8')) as any;

  it('GitHub: the apply job opts in, then commits and pushes the store file, with contents: write', () => {
    const wf = read('examples/ci/github/.github/workflows/kms-sync.yml');
    for (const [name, job] of Object.entries<any>(wf.jobs)) {
      const pushes = job.steps.some((st: any) => /git push/.test(st.run ?? ''));
      const perms = job.permissions ?? wf.permissions;
      if (pushes) expect(perms.contents, `${name} pushes`).toBe('write');
      else expect(perms.contents ?? 'read', `${name} does not push`).toBe('read');
    }
    const apply = wf.jobs.apply;
    const i = apply.steps.findIndex((st: any) => st.with?.command === 'apply');
    expect(i).toBeGreaterThanOrEqual(0);
    expect(apply.steps[i].with['allow-local-store']).toBe(true);
    const push = apply.steps.slice(i + 1).find((st: any) => /git push/.test(st.run ?? ''));
    expect(push?.if, 'the store file is pushed even when apply stopped part-way').toMatch(/always\(\)/);
    expect(push.env.STORE).toBe('kms/.kms-sync/secrets.sops.yaml');
    // The apply's records go with it: pull requests' plans compare with the base branch's.
    expect(push.env).toMatchObject({ TRUST_RECORD: 'kms/.kms-sync/trust.json', OWNER_RECORD: 'kms/.kms-sync/owner' });
    expect(push.run).toMatch(/git add -A -- "\$f"/);
  });

  it("GitHub: the example's commit step, run for real after an opted-in CI apply, pushes the new keys (rebasing once)", async () => {
    const wf = read('examples/ci/github/.github/workflows/kms-sync.yml');
    const step = wf.jobs.apply.steps.find((st: any) => /git push/.test(st.run ?? ''));
    await applied();
    // A remote the workspace pushes to, and a commit someone else pushed there meanwhile.
    const remote = path.join(s.dir, '..', `${path.basename(s.dir)}-remote.git`);
    const other = path.join(s.dir, '..', `${path.basename(s.dir)}-other`);
    try {
      execFileSync('git', ['init', '-q', '--bare', '-b', 'main', remote]);
      git('remote', 'add', 'origin', remote);
      git('push', '-q', 'origin', 'HEAD:main');
      execFileSync('git', ['clone', '-q', remote, other]);
      writeFiles(other, { 'README.md': 'someone else\n' });
      execFileSync('git', [
        '-C',
        other,
        '-c',
        'user.name=o',
        '-c',
        'user.email=o@example.invalid',
        'commit',
        '-q',
        '--allow-empty',
        '-m',
        'meanwhile',
      ]);
      execFileSync('git', ['-C', other, 'push', '-q', 'origin', 'HEAD:main']);
      writeFiles(s.dir, { 'kms-sync.yaml': withClient('billing', 'owner: shop-ci\n') }); // declared, as init writes it: the folder gained a remote since its first apply
      const r = await runCli(['apply', '--yes', '--allow-local-store'], { cwd: s.dir, env: ci() });
      expect(r.code, r.stdout + r.stderr).toBe(0);
      const run = await new Promise<{ code: number; out: string }>((resolve) => {
        execFile(
          'bash',
          ['-c', step.run],
          {
            cwd: s.dir,
            env: {
              PATH: process.env.PATH,
              HOME: s.dir,
              STORE,
              JOURNAL: '.kms-sync/journal',
              TRUST_RECORD: '.kms-sync/trust.json',
              OWNER_RECORD: '.kms-sync/owner',
              GITHUB_RUN_ID: '42',
              GITHUB_REF_NAME: 'main',
              GIT_CONFIG_NOSYSTEM: '1',
            },
          },
          (e, stdout, stderr) =>
            resolve({ code: e ? Number((e as { code?: number }).code ?? 1) : 0, out: stdout + stderr }),
        );
      });
      allOutput.push(run.out);
      expect(run.code, run.out).toBe(0);
      expect(run.out).toContain('push refused (attempt 1)');
      const pushed = execFileSync('git', ['-C', remote, 'show', `main:${STORE}`]);
      expect(pushed.equals(readFileSync(path.join(s.dir, STORE)))).toBe(true);
      expect(execFileSync('git', ['-C', remote, 'log', '-1', '--format=%s', 'main'], { encoding: 'utf8' }).trim()).toBe(
        'kms-sync: keys issued by run 42 [skip ci]',
      );
      expect(
        execFileSync('git', ['-C', remote, 'show', '--name-only', '--format=', 'main'], { encoding: 'utf8' })
          .trim()
          .split('\n'),
      ).toEqual(['.kms-sync/owner', STORE, '.kms-sync/trust.json']);
    } finally {
      rmSync(remote, { recursive: true, force: true });
      rmSync(other, { recursive: true, force: true });
    }
  });

  it('GitLab: the apply job opts in and pushes the store file even when apply stopped part-way', () => {
    const gl = read('examples/ci/gitlab/.gitlab-ci.yml');
    const script = (gl.apply.script as string[]).join('\n');
    expect(gl.apply.variables.KMS_SYNC_ALLOW_LOCAL_STORE).toBe('1');
    expect(script).toMatch(/kms-sync apply [^\n]*\|\| code=\$\?/);
    expect(script.indexOf('git push')).toBeGreaterThan(script.indexOf('kms-sync apply'));
    expect(gl.apply.variables.STORE_FILE).toBe('${KMS_CONFIG}.kms-sync/secrets.sops.yaml');
    expect(script).toMatch(/git add -A -- "\$f"/);
  });

  it('the push scripts of both examples pass shellcheck (when the Debian package is installed)', (ctx) => {
    try {
      execFileSync('shellcheck', ['--version'], { stdio: 'ignore' });
    } catch {
      return skipTest(
        ctx,
        'shellcheck is not installed (apt-get install -y shellcheck; .ci/run installs it): the push scripts are not linted',
      );
    }
    const wf = read('examples/ci/github/.github/workflows/kms-sync.yml');
    const gl = read('examples/ci/gitlab/.gitlab-ci.yml');
    const scripts = [
      ['bash', wf.jobs.apply.steps.find((st: any) => /git push/.test(st.run ?? '')).run],
      ['sh', (gl.apply.script as string[]).join('\n')],
    ];
    for (const [shell, text] of scripts) {
      const r = (() => {
        try {
          return execFileSync('shellcheck', ['-s', shell!, '-f', 'gcc', '-'], { input: text, encoding: 'utf8' });
        } catch (e) {
          return (e as { stdout?: string }).stdout ?? String(e);
        }
      })();
      expect(r, shell).toBe('');
    }
  });

  it('action.yml passes allow-local-store as the flag, to apply only', () => {
    const action = read('action.yml');
    expect(action.inputs['allow-local-store'].default).toBe('false');
    expect(action.runs.steps.find((st: any) => st.id === 'run').run).toMatch(
      /INPUT_ALLOW_LOCAL_STORE[^\n]*\n?[^\n]*--allow-local-store/,
    );
  });
});
