// Two shards of one fleet apply at once (the run lock is per environment: neither waits, with the
// default --lock-timeout 0s), and a shard SIGKILLed mid-apply, after the service issued keys it
// never saw, is recovered by its own next run alone: its orphans revoked and reissued, every live
// key of its environments held in its store, while the other shard applies beside it. Built CLI,
// emulator over HTTP.
import { spawn } from 'node:child_process';
import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startEmulator, type RunningEmulator } from '../../src/emulator/index.js';
import { shardOf } from '../../src/engine/shard.js';
import { SopsFileStore } from '../../src/secrets/index.js';
import { allOutput, cliPath, RAW_KEY_PATTERN, runCli, workspace } from '../support/cli.js';
import { patient, waitFor } from '../support/patience.js';

const API_KEY = 'sk_test_shardapply0123456789';
let emu: RunningEmulator;
let root: string;
const PROJECTS = ['ka', 'kb', 'kc', 'kd'];
const shardOfProject = (p: string) => shardOf(`project:${p}`, 2);

const config = (keys: string[]) =>
  [
    'apiVersion: kms-sync/v1',
    'owner: fleet',
    'projects:',
    ...PROJECTS.flatMap((p) => [
      `  - slug: ${p}`,
      `    name: ${p}`,
      '    environments:',
      ...['prod', 'stage'].flatMap((t) => [
        `      - type: ${t}`,
        '        url: https://api.example.test',
        '        templates: [{ name: std, rateLimitDay: 1000 }]',
        '        clients:',
        ...['c1', 'c2', 'c3'].map(
          (c) => `          - { name: ${c}, template: std, keys: [${keys.map((k) => `{ name: ${k} }`).join(', ')}] }`,
        ),
      ]),
    ]),
  ].join('\n') + '\n';

const envFor = (_dir: string): NodeJS.ProcessEnv => ({
  KMS_API_URL: emu.url,
  KMS_API_KEY: API_KEY,
  SOPS_AGE_KEY_FILE: path.join(root, 'age', 'keys.txt'),
  KMS_SYNC_ALLOW_LOCAL_STORE: '1',
});
/** Each shard runs in its own checkout, as each CI job or pod does. */
const checkout = (name: string, keys: string[]) => {
  const dir = path.join(root, name);
  mkdirSync(dir, { recursive: true });
  writeFileSync(path.join(dir, 'kms.yaml'), config(keys));
  return dir;
};
const cli = (dir: string, args: string[]) => runCli(args, { cwd: dir, env: envFor(dir) });
const timed = async (dir: string, args: string[]) => {
  const start = Date.now();
  const r = await cli(dir, args);
  return { ...r, start, end: Date.now() };
};
const headers = { 'x-api-key': API_KEY };
const liveKeys = async (pe: string) => {
  const body = (await (await fetch(`${emu.url}/client?project_env=${pe}&limit=100`, { headers })).json()) as {
    data: { name: string; keys: { id?: string; key_uuid?: string; name: string }[] }[];
  };
  return body.data.flatMap((c) =>
    c.keys.map((k) => ({ address: `${pe}/${c.name}/${k.name}`, id: k.id ?? k.key_uuid })),
  );
};

beforeAll(async () => {
  emu = await startEmulator({ port: 0, apiKeys: [API_KEY] });
  root = workspace();
});
afterAll(async () => {
  await emu?.close();
  for (const text of allOutput) expect(text).not.toMatch(RAW_KEY_PATTERN);
});

describe('shards apply on their own', () => {
  it(
    'two shards apply at once; one killed mid-apply recovers alone',
    async () => {
      // The projects are new: each goes whole to its project's shard, and both shards get some.
      const bySard = [0, 1].map((s) => PROJECTS.filter((p) => shardOfProject(p) === s));
      expect(
        bySard.every((x) => x.length > 0),
        JSON.stringify(bySard),
      ).toBe(true);
      const a = checkout('shard-1', ['primary']);
      const b = checkout('shard-2', ['primary']);
      // Slow creates, so the two runs overlap.
      emu.addFault({ method: 'POST', route: '/client', mode: 'delay', delayMs: 600, times: 4 });
      const [x, y] = await Promise.all([
        timed(a, ['apply', '-f', 'kms.yaml', '--shard', '1/2', '--auto-approve']),
        timed(b, ['apply', '-f', 'kms.yaml', '--shard', '2/2', '--auto-approve']),
      ]);
      expect(x.code, x.stderr).toBe(0);
      expect(y.code, y.stderr).toBe(0);
      expect(Math.max(x.start, y.start) < Math.min(x.end, y.end), 'the two applies ran at the same time').toBe(true);
      for (const [dir, k] of [
        [a, 1],
        [b, 2],
      ] as const) {
        const again = await cli(dir, ['plan', '-f', 'kms.yaml', '--shard', `${k}/2`, '--detailed-exitcode']);
        expect(again.code, again.stdout + again.stderr).toBe(0);
      }

      // A second key everywhere; shard 1 is killed after the service issued a key it never received.
      writeFileSync(path.join(a, 'kms.yaml'), config(['primary', 'second']));
      writeFileSync(path.join(b, 'kms.yaml'), config(['primary', 'second']));
      emu.resetCounts();
      emu.addFault({
        method: 'PUT',
        route: '/client/{client_uuid}',
        mode: 'delay-after-commit',
        delayMs: 60_000,
        times: 1,
      });
      const child = spawn(process.execPath, [cliPath, 'apply', '-f', 'kms.yaml', '--shard', '1/2', '--auto-approve'], {
        cwd: a,
        env: {
          PATH: process.env.PATH,
          HOME: process.env.HOME,
          TMPDIR: process.env.TMPDIR,
          NO_COLOR: '1',
          ...envFor(a),
        },
        stdio: 'ignore',
      });
      const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
      await waitFor(() => (emu.counts()['PUT /client/{client_uuid}'] ?? 0) >= 1, 60_000);
      expect(emu.counts()['PUT /client/{client_uuid}'], 'shard 1 sent a key-issuing update').toBeGreaterThanOrEqual(1);
      // Shard 2 applies while shard 1 hangs on the answer, then shard 1 is killed.
      const other = cli(b, ['apply', '-f', 'kms.yaml', '--shard', '2/2', '--auto-approve']);
      child.kill('SIGKILL');
      expect(await exited).toBe(null);
      expect((await other).code).toBe(0);
      expect(existsSync(path.join(a, '.kms-sync', 'journal')), 'the killed run left its journal').toBe(true);

      // Shard 1's next run recovers alone: exit 0, then nothing left to do, and every live key of its environments held.
      const recovered = await cli(a, ['apply', '-f', 'kms.yaml', '--shard', '1/2', '--auto-approve']);
      expect(recovered.code, recovered.stderr).toBe(0);
      const plan = await cli(a, ['plan', '-f', 'kms.yaml', '--shard', '1/2', '--detailed-exitcode', '--json']);
      expect(plan.code, plan.stderr).toBe(0);
      expect((JSON.parse(plan.stdout) as { key_findings: unknown[] }).key_findings, plan.stdout.slice(0, 3000)).toEqual(
        [],
      );
      for (const [dir, shard] of [
        [a, 0],
        [b, 1],
      ] as const) {
        const stored = await new SopsFileStore(path.join(dir, '.kms-sync', 'secrets.sops.yaml'), { env: envFor(dir) })
          .list!();
        const held = new Map(stored.map((s) => [s.name, s.meta?.keyId]));
        for (const p of bySard[shard]!) {
          for (const t of ['prod', 'stage']) {
            for (const k of await liveKeys(`${p}-${t}`))
              expect(held.get(k.address), `${k.address} in shard ${shard + 1}'s store`).toBe(k.id);
          }
        }
      }
    },
    patient(240_000),
  );
});
