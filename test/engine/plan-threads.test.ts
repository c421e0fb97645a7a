// A streamed plan made on worker threads (engine/plan-threads.ts, KMS_SYNC_PLAN_THREADS=2) prints
// what the plan made on one thread prints (KMS_SYNC_PLAN_THREADS=1, the path before), byte for byte:
// text, JSON, Markdown, the saved plan, a shard's plan, drift's report, the exit code, on random fleets against
// the emulator over HTTP, through the built CLI (its bundle starts the workers from their own
// entry). The secret stores are asked (keys whose secrets are not held), the reads are counted,
// and a configuration only the whole load can check (two environments' keys writing one secret)
// is refused as on one thread.
import { readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startEmulator, type RunningEmulator } from '../../src/emulator/index.js';
import { allOutput, RAW_KEY_PATTERN, runCli, startCli } from '../support/cli.js';
import { randomFleet } from '../support/fleet.js';
import { patient, waitFor } from '../support/patience.js';
import { scratchDir } from '../support/scratch.js';

const API_KEY = 'sk_test_threads0123456789';
let emu: RunningEmulator;

beforeAll(async () => {
  emu = await startEmulator({ port: 0, apiKeys: [API_KEY] });
});
afterAll(async () => {
  await emu?.close();
  for (const text of allOutput) expect(text).not.toMatch(RAW_KEY_PATTERN);
});

/** A text with the plan's time blanked (two runs differ only there: JSON fields, Markdown's footer). */
const timeless = (text: string) =>
  text
    .replace(/"(?:generatedAt|generated_at)":\s*"[^"]+"/g, '"generated_at": "…"')
    .replace(/(<sub>kms-sync \w+ · )[^<]+/g, '$1…');
const comparable = (r: { code: number; stdout: string; stderr: string }, saved = '') => ({
  code: r.code,
  stdout: timeless(r.stdout),
  stderr: r.stderr,
  saved: timeless(saved),
});

/** Runs `args` in `dir` on `threads` threads: its output, the saved plan (--out), the requests it sent, and whether workers planned. */
async function run(dir: string, args: string[], threads: number, extraEnv: NodeJS.ProcessEnv = {}) {
  const profile = path.join(dir, `profile-${threads}.json`);
  emu.resetCounts();
  const r = await runCli(args, {
    cwd: dir,
    env: {
      KMS_API_URL: emu.url,
      KMS_API_KEY: API_KEY,
      KMS_SYNC_PLAN_THREADS: String(threads),
      KMS_SYNC_PROFILE: profile,
      ...extraEnv,
    },
  });
  const requests = Object.values(emu.counts()).reduce((a, b) => a + b, 0);
  const saved = args.includes('--out') && r.code !== 1 ? readFileSync(path.join(dir, 'plan.json'), 'utf8') : '';
  const phases = JSON.parse(readFileSync(profile, 'utf8')).phases as Record<string, number>;
  return { r, saved, requests, onThreads: phases.threadsMs !== undefined };
}

/** A configuration of two environments (the least a plan streams), `clients` clients each. */
function twoEnvs(dir: string, clients = 3): void {
  const env = (type: string) =>
    `      - type: ${type}\n        url: https://x.example\n        templates: [{ name: std, rateLimitDay: 5 }]\n` +
    `        clients:\n${Array.from({ length: clients }, (_, i) => `          - { name: c${i}, template: std }\n`).join('')}`;
  writeFileSync(
    path.join(dir, 'kms-sync.yaml'),
    `apiVersion: kms-sync/v1\nowner: threads\nprojects:\n  - slug: two\n    name: two\n    environments:\n${env('prod')}${env('dev')}`,
  );
}

/** A stack trace or an unhandled error in a CLI's output. */
const CRASH = /Unhandled 'error'|\n\s+at .+:\d+:\d+/;

describe('a plan on worker threads', () => {
  it(
    'prints what the plan on one thread prints, on random fleets',
    async () => {
      let withOps = 0;
      for (let seed = 1; seed <= 4; seed++) {
        const dir = scratchDir();
        writeFileSync(
          path.join(dir, 'kms-sync.yaml'),
          randomFleet(seed, `t${seed}`, (req) => emu.service.seed(req)),
        );
        const runs: string[][] = [
          // The stores are asked (the keys' secrets are not held: findings and warnings).
          ['plan', '-f', '.', '--out', 'plan.json', '--detailed-exitcode'],
          [
            ['plan', '-f', '.', '--json', '--prune', '--no-secret-check'],
            ['plan', '-f', '.', '--format', 'markdown', '--env', `t${seed}a*`],
            ['drift', '-f', '.', '--no-usage', '--json'],
            ['plan', '-f', '.', '--shard', '2/2', '--json'],
          ][seed - 1]!,
        ];
        for (const args of runs) {
          const one = await run(dir, args, 1);
          const two = await run(dir, args, 2);
          const what = `seed ${seed}: ${args.join(' ')}`;
          expect(comparable(two.r, two.saved), what).toEqual(comparable(one.r, one.saved));
          expect(two.requests, what).toBe(one.requests);
          expect(one.onThreads, what).toBe(false);
          // A fleet of one environment with clients is loaded whole, on this thread.
          const envs = (readFileSync(path.join(dir, 'kms-sync.yaml'), 'utf8').match(/clients:/g) ?? []).length;
          if (envs > 1 && one.r.code !== 1) expect(two.onThreads, what).toBe(true);
          if (args.includes('--out') && one.r.code === 2) withOps++;
        }
      }
      expect(withOps).toBeGreaterThan(1);
    },
    patient(180_000),
  );

  it(
    'refuses what only the whole load can check as the plan on one thread does',
    async () => {
      const dir = scratchDir();
      const env = (type: string) =>
        `      - type: ${type}\n        url: https://x.example\n        templates: [{ name: std, rateLimitDay: 5 }]\n` +
        `        clients:\n          - { name: c-${type}, template: std, keys: [{ name: main, secret: { name: shared } }] }\n`;
      writeFileSync(
        path.join(dir, 'kms-sync.yaml'),
        `apiVersion: kms-sync/v1\nowner: threads\nprojects:\n  - slug: clash\n    name: clash\n    environments:\n${env('prod')}${env('dev')}`,
      );
      const args = ['plan', '-f', '.'];
      const one = await run(dir, args, 1);
      const two = await run(dir, args, 2);
      expect(one.r.code).toBe(1);
      expect(one.r.stderr).toMatch(/kms-sync\.yaml:\d+:\d+.*would both write the secret "shared"/s);
      expect(comparable(two.r)).toEqual(comparable(one.r));
      // A problem a worker finds in its environment's clients (a template not defined): the whole
      // load reports it, at its place.
      twoEnvs(dir);
      const file = path.join(dir, 'kms-sync.yaml');
      writeFileSync(file, readFileSync(file, 'utf8').replace(/(type: dev[\s\S]*?c1, template: )std/, '$1stdd'));
      const badOne = await run(dir, args, 1);
      const badTwo = await run(dir, args, 2);
      expect(badOne.r.stderr).toMatch(/kms-sync\.yaml:\d+:\d+: .*template "stdd" is not defined/);
      expect(comparable(badTwo.r)).toEqual(comparable(badOne.r));
    },
    patient(60_000),
  );

  it(
    "a pull request's configuration cannot read a variable the operator did not allow through a worker's ${env:}",
    async () => {
      // The attacker writes the configuration; the operator's environment holds a value no policy allows it to read.
      const dir = scratchDir();
      twoEnvs(dir);
      const file = path.join(dir, 'kms-sync.yaml');
      writeFileSync(
        file,
        readFileSync(file, 'utf8').replace(
          /(type: dev[\s\S]*?\{ name: c1, template: std)/,
          '$1, metadata: { leak: "${env:THREADS_OPERATOR_VALUE}" }',
        ),
      );
      const secret = 'operator-only-value-7f3a9c';
      const args = ['plan', '-f', '.', '--no-secret-check'];
      const one = await run(dir, args, 1, { THREADS_OPERATOR_VALUE: secret });
      const two = await run(dir, args, 2, { THREADS_OPERATOR_VALUE: secret });
      expect(one.r.code).toBe(1);
      expect(one.r.stderr).toMatch(/kms-sync\.yaml:\d+:\d+: .*THREADS_OPERATOR_VALUE/);
      expect(comparable(two.r)).toEqual(comparable(one.r));
      for (const r of [one.r, two.r]) expect(r.stdout + r.stderr).not.toContain(secret);
    },
    patient(60_000),
  );

  it(
    "says a service's refusal met in a worker as the plan on one thread says it",
    async () => {
      const dir = scratchDir();
      twoEnvs(dir);
      const args = ['plan', '-f', '.'];
      await runCli(['apply', '-f', '.', '--auto-approve'], {
        cwd: dir,
        env: { KMS_API_URL: emu.url, KMS_API_KEY: API_KEY },
      });
      const refused = () => emu.addFault({ method: 'GET', route: '/endpoint', mode: 'error', status: 403, times: 1 });
      refused();
      const one = await run(dir, args, 1);
      refused();
      const two = await run(dir, args, 2);
      emu.clearFaults();
      expect(one.r.code).toBe(1);
      expect(one.r.stderr).toMatch(/403/);
      expect(comparable(two.r)).toEqual(comparable(one.r));
      expect(two.r.stderr).not.toMatch(CRASH);
    },
    patient(60_000),
  );

  it(
    'Ctrl-C while the workers read: exit 130, nothing changed, no stack trace',
    async () => {
      const dir = scratchDir();
      twoEnvs(dir);
      // The workers' list of clients is held back by the service when Ctrl-C comes.
      emu.addFault({ method: 'GET', route: '/client', mode: 'delay', delayMs: 10_000, times: 10 });
      emu.resetCounts();
      const {
        child,
        exit: exited,
        output,
      } = startCli(['plan', '-f', '.'], {
        cwd: dir,
        env: {
          PATH: process.env.PATH,
          NO_COLOR: '1',
          KMS_API_URL: emu.url,
          KMS_API_KEY: API_KEY,
          KMS_SYNC_PLAN_THREADS: '2',
        },
      });
      try {
        await waitFor(() => (emu.counts()['GET /client'] ?? 0) > 0, 30_000);
        child.kill('SIGINT');
        const code = await exited;
        const text = output();
        expect(code, text).toBe(130);
        expect(text).toContain('Interrupt received (SIGINT): stopping; nothing was changed in the service.');
        expect(text).not.toMatch(CRASH);
        expect(text).not.toMatch(/^Error:|retrying/m);
      } finally {
        emu.clearFaults();
        child.kill('SIGKILL');
      }
    },
    patient(60_000),
  );
});
