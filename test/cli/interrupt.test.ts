// Ctrl-C during apply (SIGINT to the process, as a terminal or a CI runner's cancel sends it): the
// run says so, finishes the requests in flight, exits 3, leaves every issued key in its store (the
// journal empty) and releases the run lock, so the next apply converges at once.
import { execFile } from 'node:child_process';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { allOutput, cliPath, RAW_KEY_PATTERN, runCli } from '../support/cli.js';
import { setup, type Setup } from './helpers.js';
import { patient } from '../support/patience.js';

const CLIENTS = 12;
const config = `apiVersion: kms-sync/v1
projects:
  - slug: big
    name: Big
    environments:
      - type: staging
        url: https://s.example
        templates: [{ name: std, rateLimitDay: 10 }]
        endpoints: [{ method: GET, path: /v1/a, name: A }]
        clients:
${Array.from({ length: CLIENTS }, (_, i) => `          - { name: c${i}, template: std, keys: [{ name: main }] }`).join('\n')}
`;

let s: Setup;
beforeAll(async () => {
  // Slow answers, so the interrupt lands while the run is under way.
  s = await setup({ 'kms-sync.yaml': config }, { latencyMs: 150 });
});
afterAll(async () => {
  await s?.emu.close();
  for (const text of allOutput) expect(text).not.toMatch(RAW_KEY_PATTERN);
});

it('SIGINT mid-apply: message, in-flight requests finish, exit 3, keys stored, lock released', async () => {
  let stdout = '';
  let stderr = '';
  let interrupted = false;
  const code = await new Promise<number>((resolve) => {
    const child = execFile(
      process.execPath,
      [cliPath, 'apply', '-f', 'kms-sync.yaml', '--auto-approve', '--json', '--parallelism', '1'],
      {
        cwd: s.dir,
        env: { PATH: process.env.PATH, HOME: process.env.HOME, ...s.env },
      },
      (error) => resolve(error ? ((error as { code?: number }).code ?? 1) : 0),
    );
    child.stdout!.on('data', (d: Buffer) => {
      stdout += d.toString();
      // The first operation done (the project): the rest of the run is still ahead.
      if (!interrupted && stdout.includes('"type":"apply_complete"')) {
        interrupted = true;
        child.kill('SIGINT');
      }
    });
    child.stderr!.on('data', (d: Buffer) => {
      stderr += d.toString();
    });
  });
  allOutput.push(stdout, stderr);
  expect(interrupted).toBe(true);
  expect(code, stderr).toBe(3);
  expect(stderr).toMatch(/Interrupt received \(SIGINT\): finishing \d+ operation\(s\) in flight/);
  const events = stdout
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l));
  const summary = events.at(-1);
  expect(summary).toMatchObject({ type: 'apply_summary', outcome: 'interrupted', exit_code: 3 });
  // Whatever was in flight finished (the engine batches a environment's clients into one step).
  expect(summary.keys_stored).toBe(events.filter((e) => e.type === 'key_stored').length);
  const storedKeys = events.filter((e) => e.type === 'key_stored').length;

  // Journal consistent: nothing waiting, every key reported stored is in the store.
  const list = JSON.parse(
    (await runCli(['secrets', 'list', '--json', '-f', 'kms-sync.yaml'], { cwd: s.dir, env: s.env })).stdout,
  );
  expect(list.journal_pending).toBe(0);
  expect(list.secrets.length).toBe(storedKeys);

  // Lock released: the next apply takes it at once (the default --lock-timeout is 0s) and converges.
  const again = await runCli(['apply', '-f', 'kms-sync.yaml', '--auto-approve'], { cwd: s.dir, env: s.env });
  expect(again.code, again.stderr).toBe(0);
  const plan = await runCli(['plan', '-f', 'kms-sync.yaml', '--detailed-exitcode'], { cwd: s.dir, env: s.env });
  expect(plan.code, plan.stderr).toBe(0);
  const after = JSON.parse(
    (await runCli(['secrets', 'list', '--json', '-f', 'kms-sync.yaml'], { cwd: s.dir, env: s.env })).stdout,
  );
  expect(after.secrets.length).toBe(CLIENTS);
});

it('one SIGINT stops a wait for the local run lock held by another process (--lock-timeout)', async () => {
  const { writeFileSync, mkdirSync, rmSync } = await import('node:fs');
  const { hostname } = await import('node:os');
  const path = await import('node:path');
  const lock = path.join(s.dir, '.kms-sync', 'run.lock');
  mkdirSync(path.dirname(lock), { recursive: true });
  // Held by a live process on this host (this test's): not stale, so the run waits for it.
  writeFileSync(lock, JSON.stringify({ pid: process.pid, host: hostname(), createdAt: new Date().toISOString() }));
  try {
    const child = execFile(
      process.execPath,
      [cliPath, 'apply', '-f', 'kms-sync.yaml', '--auto-approve', '--lock-timeout', '10m'],
      { cwd: s.dir, env: { ...process.env, ...s.env } },
    );
    let stderr = '';
    // The SIGINT goes once the run says it waits for the lock (not after a fixed delay, which a
    // loaded machine can reach before the CLI has even loaded and set its handlers).
    const waiting = new Promise<void>((resolve) => {
      child.stderr!.on('data', (d) => {
        stderr += d;
        if (stderr.includes('Waiting for the run lock')) resolve();
      });
    });
    await waiting;
    expect(stderr).toContain(`Waiting for the run lock ${lock} (pid ${process.pid} on ${hostname()}`);
    expect(child.exitCode).toBeNull(); // still waiting for the lock
    child.kill('SIGINT');
    const code = await new Promise<number | null>((resolve) => {
      const t = setTimeout(() => {
        child.kill('SIGKILL');
        resolve(-1);
      }, patient(15_000));
      // 'close', not 'exit': its stderr is read whole only once the stream has ended.
      child.on('close', (c) => {
        clearTimeout(t);
        resolve(c);
      });
    });
    allOutput.push(stderr);
    expect(code, stderr).toBe(130);
    expect(stderr).toContain('nothing was changed in the service');
  } finally {
    rmSync(lock, { force: true });
  }
});
