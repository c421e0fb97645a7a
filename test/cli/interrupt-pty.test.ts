// Interrupts as a user meets them (issue 28): Ctrl-C on a real terminal while `kms-sync apply |
// tee apply.log` runs (the terminal sends SIGINT to kms-sync and tee alike; tee dies, and kms-sync
// then writes to a pipe nobody reads), an output whose reader goes away without any signal
// (EPIPE), Ctrl-C while the plan is still being read, and a configuration that fails to load while
// its live read runs ahead. Each must end cleanly: no stack trace, the documented exit code, the
// run lock released in the folder and in the service, every key issued held by the store.
import { execFile, spawn } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, beforeEach, expect, it } from 'vitest';
import { startEmulator, type RunningEmulator } from '../../src/emulator/index.js';
import {
  checkInvariant,
  configYaml,
  Emulator,
  kmsSync,
  printedSecrets,
  readSopsStore,
  workspace,
  type DesiredClient,
} from '../crash/lib.js';
import { cliPath } from '../support/cli.js';
import { skipWhen } from '../support/skip.js';
import { patient, waitFor } from '../support/patience.js';

const API_KEY = 'sk_test_interruptpty000000';
const PROJECTS = ['alpha', 'beta', 'gamma'];
const CLIENTS: DesiredClient[] = Array.from({ length: 6 }, (_, i) => ({
  name: `c${i}`,
  keys: [{ name: 'main', overlap: false }],
}));
const PTY_HELPER = path.join(path.dirname(fileURLToPath(import.meta.url)), 'fixtures', 'pty-interrupt.py');
/** A Node.js stack frame, or the crash that the issue saw. */
const CRASH = /Unhandled 'error'|\n\s+at .+:\d+:\d+|Error: write EPIPE/;

let ws: ReturnType<typeof workspace>;
let emu: RunningEmulator;
let check: Emulator; // the campaign's view of the service (liveKeys, validates), on the same emulator
let cfgDir: string;
let env: NodeJS.ProcessEnv;

const python = await new Promise<boolean>((ok) => execFile('python3', ['-c', 'import pty'], (e) => ok(!e)));

beforeAll(() => {
  ws = workspace('interrupt');
  cfgDir = path.join(ws.dir, 'config');
});
afterAll(async () => {
  await emu?.close();
  ws.cleanup();
  expect(printedSecrets(ws.outputs)).toEqual([]);
});
beforeEach(async () => {
  // A fresh service and configuration folder for each case.
  await emu?.close();
  emu = await startEmulator({ port: 0, apiKeys: [API_KEY] });
  check = new Emulator(path.join(ws.dir, 'unused.json'), API_KEY);
  check.url = emu.url;
  writeFileSync(path.join(ws.dir, 'unused.json'), '');
  const n = Math.random().toString(36).slice(2, 8);
  cfgDir = path.join(ws.dir, `config-${n}`);
  mkdirSync(cfgDir, { recursive: true });
  for (const slug of PROJECTS) writeFileSync(path.join(cfgDir, `${slug}.yaml`), configYaml(CLIENTS, slug));
  env = {
    PATH: process.env.PATH,
    HOME: ws.dir,
    NO_COLOR: '1',
    KMS_API_URL: emu.url,
    KMS_API_KEY: API_KEY,
    SOPS_AGE_KEY_FILE: path.join(cfgDir, 'age.txt'),
    KMS_SYNC_ALLOW_LOCAL_STORE: '1',
  };
});

const storeFile = () => path.join(cfgDir, '.kms-sync', 'secrets.sops.yaml');
const quote = (a: string) => `'${a.replace(/'/g, `'\\''`)}'`;

function cli(args: string[]): Promise<{ code: number; out: string }> {
  return new Promise((resolve) => {
    execFile(process.execPath, [cliPath, ...args], { cwd: ws.dir, env }, (e, stdout, stderr) => {
      ws.outputs.push(stdout, stderr);
      resolve({
        code: e ? (typeof (e as { code?: unknown }).code === 'number' ? (e as { code: number }).code : 1) : 0,
        out: stdout + stderr,
      });
    });
  });
}

/**
 * Runs a shell line on a pseudo-terminal and types Ctrl-C once the store file appears (the first
 * key is stored), and again once the output after it matches `second`.
 */
function onTerminal(
  line: string,
  trigger: string,
  second?: string,
): Promise<{ status: number; interrupted: boolean; twice: boolean; output: string }> {
  return new Promise((resolve, reject) => {
    execFile(
      'python3',
      [PTY_HELPER, '^$', String(Math.round(patient(90_000) / 1000)), line, trigger, ...(second ? [second] : [])],
      { cwd: ws.dir, env: { ...env, TERM: 'dumb' }, maxBuffer: 16 * 1024 * 1024 },
      (e, stdout) => {
        if (e) return reject(e);
        const r = JSON.parse(stdout);
        ws.outputs.push(r.output);
        resolve(r);
      },
    );
  });
}

/** No run lock left: not the local file, not a record in the service. */
async function expectLockReleased() {
  expect(existsSync(path.join(cfgDir, '.kms-sync', 'run.lock'))).toBe(false);
  for (const slug of PROJECTS) {
    const list = await check.call('GET', `/endpoint?project_env=${slug}-production&limit=100`);
    expect((list?.data ?? []).filter((e: { path: string }) => e.path.startsWith('/__kms-sync/lock/'))).toEqual([]);
  }
}

/**
 * Every live key is held by the store with a value the service accepts (none lost, none stray),
 * or, before the next run, reported by `plan` (a key cut off in flight is an orphan it revokes).
 */
async function expectNoKeyLost(converged: boolean) {
  const stored = await readSopsStore(storeFile(), env.SOPS_AGE_KEY_FILE!);
  const reported = converged ? '' : (await cli(['plan', '-f', cfgDir])).out;
  for (const slug of PROJECTS) {
    const projectEnv = `${slug}-production`;
    const wanted = CLIENTS.map((c) => ({
      client: c.name,
      key: 'main',
      overlap: false,
      secret: `${projectEnv}/${c.name}/main`,
    }));
    const inv = await checkInvariant({ emu: check, projectEnv, wanted, stored, reported });
    // Before converging, keys not issued yet are missing; none may be lost or stray.
    expect(converged ? inv.problems : inv.problems.filter((p) => !p.startsWith('MISSING')), projectEnv).toEqual([]);
  }
}

/** After the interrupted run: the next apply takes the lock at once and converges; plan is empty. */
async function expectConverges() {
  const again = await cli(['apply', '-f', cfgDir, '--auto-approve']);
  expect(again.code, again.out).toBe(0);
  const plan = await cli(['plan', '-f', cfgDir, '--detailed-exitcode']);
  expect(plan.code, plan.out).toBe(0);
  await expectNoKeyLost(true);
}

it.skipIf(
  skipWhen(!python, 'test/cli/interrupt-pty.test.ts: no python3 with its pty module to drive a pseudo-terminal'),
)(
  'Ctrl-C on a terminal during `kms-sync apply | tee apply.log`: exit 3, no stack trace, lock released, every key stored',
  async () => {
    // Slow creates, one at a time: the run is mid-apply when the first key reaches the store.
    emu.addFault({ method: 'POST', route: '/client', mode: 'delay', delayMs: 400, times: 10 });
    emu.addFault({ method: 'POST', route: '/project', mode: 'delay', delayMs: 150, times: 10 });
    const codeFile = path.join(ws.dir, `code-${path.basename(cfgDir)}`);
    // The shell and the group around kms-sync outlive the Ctrl-C (a trap, not an ignore: kms-sync
    // and tee get the default SIGINT), so that kms-sync's own exit code can be recorded.
    const line = `trap 'true' INT; { trap 'true' INT; ${[process.execPath, cliPath, 'apply', '-f', cfgDir, '--auto-approve', '--parallelism', '1'].map(quote).join(' ')}; echo $? > ${quote(codeFile)}; } | tee ${quote(path.join(cfgDir, 'apply.log'))}`;
    const r = await onTerminal(line, storeFile());
    expect(r.interrupted).toBe(true);
    expect(readFileSync(codeFile, 'utf8').trim(), r.output).toBe('3');
    expect(r.output).toMatch(/Interrupt received \(SIGINT\): finishing \d+ operation\(s\) in flight/);
    expect(r.output).not.toMatch(CRASH);
    expect(r.output).not.toMatch(/finishing -/);
    // tee died with the Ctrl-C: the summary meant for stdout reaches the terminal on stderr, after
    // the line docs/cli.md promises, and names the keys that were stored.
    const after = r.output.slice(r.output.indexOf('Interrupt received'));
    expect(after).toContain('Output closed (stdout: EPIPE): the rest of the output follows on stderr.');
    expect(after).toMatch(/Apply interrupted\. Resources: \d+ created/);
    expect(after).toMatch(/Keys issued and stored \([1-9]\d*\):\r?\n {2}key\.\w+-production\/c\d\/main → sops:/);
    expect(after).toMatch(/Unresolved \(\d+\):/);
    expect(after).toContain('Run kms-sync apply again to converge');
    // The log holds what tee wrote before it died: the plan, nothing cut into a stack trace.
    expect(readFileSync(path.join(cfgDir, 'apply.log'), 'utf8')).toContain('Plan:');
    await expectLockReleased();
    await expectNoKeyLost(false);
    await expectConverges();
  },
  patient(120_000),
);

it.skipIf(
  skipWhen(!python, 'test/cli/interrupt-pty.test.ts: no python3 with its pty module to drive a pseudo-terminal'),
)(
  'a second Ctrl-C on a terminal mid-apply: exit 3 at once, a summary of what was done, no half-drawn line, every key held after the next run',
  async () => {
    // The first client batch is quick; the next ones are committed, then answered late: the second
    // Ctrl-C cuts one off in flight (its keys are created but never received: the next run revokes them).
    emu.addFault({ method: 'POST', route: '/client', mode: 'delay', delayMs: 300, times: 1 });
    emu.addFault({ method: 'POST', route: '/client', mode: 'delay-after-commit', delayMs: 60_000, times: 10 });
    const codeFile = path.join(ws.dir, `code-${path.basename(cfgDir)}`);
    const line = `trap 'true' INT; { trap 'true' INT; ${[process.execPath, cliPath, 'apply', '-f', cfgDir, '--auto-approve', '--parallelism', '1'].map(quote).join(' ')}; echo $? > ${quote(codeFile)}; }`;
    // The first Ctrl-C once the first batch's keys are in the store file (names are clear text in SOPS).
    const trigger = path.join(ws.dir, `stored-${path.basename(cfgDir)}`);
    let watching = true;
    void (async () => {
      while (
        watching &&
        !(existsSync(storeFile()) && readFileSync(storeFile(), 'utf8').includes('alpha-production/c5/main'))
      )
        await new Promise((ok) => setTimeout(ok, 50));
      if (watching) writeFileSync(trigger, '');
    })();
    const r = await onTerminal(line, trigger, 'Interrupt again to exit at once').finally(() => {
      watching = false;
    });
    expect(r.interrupted && r.twice, r.output).toBe(true);
    expect(readFileSync(codeFile, 'utf8').trim(), r.output).toBe('3');
    expect(r.output).not.toMatch(CRASH);
    const after = r.output.slice(r.output.indexOf('Second interrupt: exiting now.'));
    expect(after, r.output).toMatch(/Apply cut short by a second interrupt\. Resources: \d+ created/);
    expect(after).toMatch(/Keys issued and stored \([1-9]\d*\):\r?\n {2}key\.alpha-production\/c0\/main → sops:/);
    expect(after).toMatch(/[1-9]\d* operation\(s\) in flight were cut off: the next run re-reads them\./);
    // The output ends with a whole line: no progress line drawn after the summary.
    expect(after.trimEnd().split(/\r?\n/).pop()).toMatch(/Run kms-sync apply again to converge\.$/);
    expect(after).not.toMatch(/Applying… [^\n]*$/);
    emu.clearFaults();
    // Exiting at once leaves the run lock of a dead process: the next run breaks it (expectConverges).
    await expectNoKeyLost(false);
    await expectConverges();
  },
  patient(120_000),
);

it(
  'stdout closed by its reader mid-apply (EPIPE, no signal): an interrupt, exit 3, lock released, every key stored',
  async () => {
    emu.addFault({ method: 'POST', route: '/client', mode: 'delay', delayMs: 300, times: 10 });
    const child = spawn(
      process.execPath,
      [cliPath, 'apply', '-f', cfgDir, '--auto-approve', '--json', '--parallelism', '1'],
      { cwd: ws.dir, env, stdio: ['ignore', 'pipe', 'pipe'] },
    );
    let stdout = '';
    let stderr = '';
    child.stderr!.on('data', (d: Buffer) => {
      stderr += d.toString();
    });
    // Like `| head`: the reader takes what it wants (up to the first key stored) and goes.
    child.stdout!.on('data', (d: Buffer) => {
      stdout += d.toString();
      if (stdout.includes('"type":"key_stored"')) child.stdout!.destroy();
    });
    const code = await new Promise<number | null>((ok) => child.on('close', ok));
    ws.outputs.push(stdout, stderr);
    expect(stdout).toContain('"type":"key_stored"');
    expect(code, stderr).toBe(3);
    expect(stderr).toMatch(/Output closed \(stdout: EPIPE\): finishing \d+ operation\(s\) in flight/);
    // The outcome, for people, where it can still be read.
    expect(stderr).toMatch(/Apply interrupted: exit 3; \d+ created, .*; [1-9]\d* key\(s\) stored\./);
    expect(stderr).not.toMatch(CRASH);
    await expectLockReleased();
    await expectNoKeyLost(false);
    await expectConverges();
  },
  patient(120_000),
);

it(
  'Ctrl-C while the plan is read: exit 130, no stack trace, nothing changed, lock released',
  async () => {
    emu.addFault({ method: 'GET', route: '/project', mode: 'delay', delayMs: 5000, times: 10 });
    const {
      child,
      exit: exited,
      output,
    } = kmsSync(['apply', '-f', cfgDir, '--auto-approve'], {
      cwd: ws.dir,
      env,
      sink: ws.outputs,
    });
    // The run holds its lock and reads the projects (held back by the service) when Ctrl-C comes.
    await waitFor(() => (emu.counts()['GET /project'] ?? 0) > 0, 30_000);
    expect(emu.counts()['GET /project']).toBeGreaterThan(0);
    child.kill('SIGINT');
    const code = await exited;
    const text = output();
    expect(code, text).toBe(130);
    expect(text).toContain('Interrupt received (SIGINT): stopping; nothing was changed in the service.');
    expect(text).not.toMatch(CRASH);
    expect(text).not.toMatch(/^Error:/m);
    expect(text).not.toMatch(/retrying/);
    expect(emu.counts()['POST /client'] ?? 0).toBe(0);
    await expectLockReleased();
  },
  patient(60_000),
);

it(
  'a configuration that does not load while its live read runs ahead: the read is dropped silently (no false retry lines)',
  async () => {
    await cli(['apply', '-f', cfgDir, '--auto-approve']);
    writeFileSync(
      path.join(cfgDir, 'alpha.yaml'),
      configYaml(CLIENTS, 'alpha').replace('template: std', 'template: nope'),
    );
    emu.addFault({ method: 'GET', route: '/project', mode: 'delay', delayMs: 1500, times: 10 });
    emu.addFault({ method: 'GET', route: '/project/{project_env}', mode: 'delay', delayMs: 1500, times: 10 });
    const r = await cli(['plan', '-f', cfgDir]);
    expect(r.code).toBe(1);
    expect(r.out).toMatch(/configuration is not valid/);
    expect(r.out).not.toMatch(/retrying|ECONNRESET/);
  },
  patient(60_000),
);
