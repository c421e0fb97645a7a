// --shard K/N and `kms-sync report merge` (issue 37), through the built CLI against the emulator
// over HTTP: every environment is in exactly one shard, a project the configuration defines stays
// whole in one shard, and the 4 shards' plans merged are the plan of the whole fleet, byte
// for byte in JSON, Markdown and text (the generation time aside: each run has its own).
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startEmulator, type RunningEmulator } from '../../src/emulator/index.js';
import { parseShard, shardOf, shardScope } from '../../src/engine/shard.js';
import { runCli, workspace } from '../support/cli.js';
import { randomFleet } from '../support/fleet.js';
import { patient } from '../support/patience.js';

const API_KEY = 'sk_test_shard0123456789';
let emu: RunningEmulator;
let env: NodeJS.ProcessEnv;

beforeAll(async () => {
  emu = await startEmulator({ port: 0, apiKeys: [API_KEY] });
  env = { KMS_API_URL: emu.url, KMS_API_KEY: API_KEY };
});
afterAll(async () => {
  await emu?.close();
});

/** The generation time is the run's own; everything else must match. */
const timeless = (s: string) =>
  s.replace(/("generated_at": )"[^"]*"/g, '$1"…"').replace(/\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z/g, '…');

describe('--shard K/N', () => {
  it('parses K/N and JOB_COMPLETION_INDEX, and refuses what is not a shard', () => {
    expect(parseShard('2/4', {})).toEqual({ index: 1, count: 4 });
    expect(parseShard('4', { JOB_COMPLETION_INDEX: '3' })).toEqual({ index: 3, count: 4 });
    expect(() => parseShard('4', {})).toThrow(/JOB_COMPLETION_INDEX.*not set/);
    expect(() => parseShard('5/4', {})).toThrow(/does not exist/);
    expect(() => parseShard('4', { JOB_COMPLETION_INDEX: '4' })).toThrow(/does not exist/);
    expect(() => parseShard('a/b', {})).toThrow(/expected K\/N/);
  });

  it('puts each environment in one shard: a defined project whole in its own, a referenced one spread', () => {
    const envs = Array.from({ length: 40 }, (_, i) => ({
      project: `p${i % 8}`,
      type: `t${i}`,
      projectEnv: `p${i % 8}-t${i}`,
      url: 'u',
    }));
    // p0 … p5 are defined (the configuration creates and deletes them), p6 and p7 only referenced (external).
    const desired = {
      projects: Array.from({ length: 6 }, (_, i) => ({ slug: `p${i}`, name: `p${i}` })),
      externalProjects: [{ slug: 'p6' }, { slug: 'p7' }],
      envs,
      templates: [],
      clients: [],
      endpoints: [],
      stores: [],
    } as never;
    const shards = [0, 1, 2, 3].map((index) => shardScope(desired, { index, count: 4 }));
    const seen = shards.flatMap((s) => s.desired.envs.map((e) => e.projectEnv)).sort();
    expect(seen).toEqual(envs.map((e) => e.projectEnv).sort());
    for (let i = 0; i < 6; i++) {
      const holding = shards.filter((s) => s.desired.envs.some((e) => e.project === `p${i}`));
      expect(holding.length, `p${i}`).toBe(1);
      expect(holding[0]!.ownsProject(`p${i}`)).toBe(true);
      expect(shards.filter((s) => s.ownsProject(`p${i}`)).length).toBe(1);
    }
    // A referenced project's environments are spread by their own hash.
    expect(
      shards.filter((s) => s.desired.envs.some((e) => e.project === 'p6' || e.project === 'p7')).length,
    ).toBeGreaterThan(1);
    // Stable: the same shards on every run.
    expect(shardOf('project:p0', 4)).toBe(shardOf('project:p0', 4));
    expect(shardScope(desired, { index: 2, count: 4 }).desired.envs).toEqual(shards[2]!.desired.envs);
  });

  it(
    '4 shards merged with report merge are the plan of the whole fleet, in JSON, Markdown and text',
    async () => {
      for (const seed of [3, 7]) {
        const dir = workspace();
        writeFileSync(
          path.join(dir, 'kms-sync.yaml'),
          randomFleet(seed, `m${seed}`, (req) => emu.service.seed(req)),
        );
        const run = (args: string[]) => runCli(args, { cwd: dir, env });
        const base = ['-f', 'kms-sync.yaml', '--no-secret-check'];
        const whole = await run(['plan', ...base, '--json']);
        expect(whole.code, whole.stderr).toBe(0);
        const shardEnvs: string[][] = [];
        for (let k = 1; k <= 4; k++) {
          const r = await run(['plan', ...base, '--json', '--shard', `${k}/4`]);
          expect(r.code, r.stderr).toBe(0);
          writeFileSync(path.join(dir, `shard-${k}.json`), r.stdout);
          shardEnvs.push((JSON.parse(r.stdout) as { target: { environments: string[] } }).target.environments);
        }
        const files = [4, 2, 1, 3].map((k) => `shard-${k}.json`); // any order
        for (const format of ['json', 'markdown', 'text']) {
          const merged = await run(['report', 'merge', ...files, '--format', format]);
          expect(merged.code, merged.stderr).toBe(0);
          const direct = format === 'json' ? whole : await run(['plan', ...base, '--format', format]);
          expect(timeless(merged.stdout), `seed ${seed}, ${format}`).toBe(timeless(direct.stdout));
        }
        const all = shardEnvs.flat();
        expect(new Set(all).size, 'no environment in two shards').toBe(all.length);
        expect(all.sort()).toEqual(
          (JSON.parse(whole.stdout) as { target: { environments: string[] } }).target.environments,
        );
        expect(shardEnvs.filter((e) => e.length > 0).length, 'the fleet is spread').toBeGreaterThan(1);
        // One exit code: 2 with changes (--detailed-exitcode), as plan's.
        const code = await run(['report', 'merge', ...files, '--detailed-exitcode', '--format', 'json']);
        expect(code.code).toBe(
          (JSON.parse(whole.stdout) as { resource_changes: unknown[] }).resource_changes.length > 0 ? 2 : 0,
        );
        // A missing shard is refused: its environments would read as unchanged.
        const missing = await run(['report', 'merge', 'shard-1.json', 'shard-2.json', 'shard-4.json']);
        expect(missing.code).toBe(1);
        expect(missing.stderr).toMatch(/shard\(s\) 3\/4 missing/);
      }
    },
    patient(180_000),
  );

  it(
    "4 shards' drift reports merged are the drift report of the whole fleet, ignore rules and usage samples included",
    async () => {
      const dir = workspace();
      writeFileSync(
        path.join(dir, 'kms-sync.yaml'),
        randomFleet(5, 'd5', (req) => emu.service.seed(req)),
      );
      const run = (args: string[]) => runCli(args, { cwd: dir, env });
      const base = ['drift', '-f', 'kms-sync.yaml', '--no-secret-check'];
      const first = await run([...base, '--json']);
      expect(first.code, first.stderr).toBe(2);
      // One rule that hides an item (used by one shard only) and one that matches nothing (unused by all).
      const items = (JSON.parse(first.stdout) as { items: { address: string }[] }).items;
      writeFileSync(path.join(dir, '.kmsignore'), `${items[0]!.address}\nclient.nowhere-prod/nobody\n`);
      for (let k = 1; k <= 4; k++) {
        const r = await run([...base, '--json', '--shard', `${k}/4`]);
        expect([0, 2], r.stderr).toContain(r.code);
        writeFileSync(path.join(dir, `drift-${k}.json`), r.stdout);
      }
      // Two orders: the shard whose rule hid an item comes first in at most one of them.
      for (const order of [
        [1, 2, 3, 4],
        [4, 3, 2, 1],
      ]) {
        const files = order.map((k) => `drift-${k}.json`);
        for (const format of ['json', 'markdown', 'text']) {
          const merged = await run(['report', 'merge', ...files, '--format', format]);
          const direct = await run([...base, '--format', format]);
          expect(direct.code, direct.stderr).toBe(2);
          expect(merged.code, merged.stderr).toBe(2);
          expect(timeless(merged.stdout), `${order.join('')} ${format}`).toBe(timeless(direct.stdout));
          if (format === 'json')
            expect((JSON.parse(merged.stdout) as { ignore: { unused: string[] } }).ignore.unused).toEqual([
              '.kmsignore:2: client.nowhere-prod/nobody',
            ]);
        }
      }
      // A missing shard, or a plan among drift reports, is refused.
      const missing = await run(['report', 'merge', 'drift-1.json', 'drift-2.json', 'drift-3.json']);
      expect(missing.code).toBe(1);
      expect(missing.stderr).toMatch(/shard\(s\) 4\/4 missing: the merged drift report/);
      writeFileSync(
        path.join(dir, 'plan-1.json'),
        (await run(['plan', '-f', 'kms-sync.yaml', '--no-secret-check', '--json', '--shard', '1/4'])).stdout,
      );
      const mixed = await run(['report', 'merge', 'plan-1.json', 'drift-2.json', 'drift-3.json', 'drift-4.json']);
      expect(mixed.code).toBe(1);
      expect(mixed.stderr).toMatch(/plan-1\.json is a plan and drift-2\.json a drift report/);
    },
    patient(180_000),
  );
});
