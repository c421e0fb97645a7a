// Apply environment by environment (engine/stream-apply.ts): a plan over the hold limit
// (KMS_SYNC_APPLY_HOLD_OPERATIONS, here 0) is confirmed from its whole-fleet totals, guarded by
// --max-deletes over the whole fleet, and applied part by part after a second read; a part whose
// plan moved in between is not applied. Against the built CLI and the emulator over HTTP: random
// fleets applied both ways end in the same live state, with the same events, summary and exit code.
import { readFileSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startEmulator, type RunningEmulator } from '../../src/emulator/index.js';
import { allOutput, RAW_KEY_PATTERN, runCli, workspace } from '../support/cli.js';
import { randomFleet } from '../support/fleet.js';
import { patient } from '../support/patience.js';
import { cliCommand, runInTty } from '../cli/helpers.js';

const API_KEY = 'sk_test_streamapply0123456789';
const STREAM = { KMS_SYNC_APPLY_HOLD_OPERATIONS: '0' };
let whole: RunningEmulator;
let streamed: RunningEmulator;

beforeAll(async () => {
  [whole, streamed] = await Promise.all([
    startEmulator({ port: 0, apiKeys: [API_KEY] }),
    startEmulator({ port: 0, apiKeys: [API_KEY] }),
  ]);
});
afterAll(async () => {
  await Promise.all([whole?.close(), streamed?.close()]);
  for (const text of allOutput) expect(text).not.toMatch(RAW_KEY_PATTERN);
});

const envFor = (emu: RunningEmulator, dir: string, extra: NodeJS.ProcessEnv = {}): NodeJS.ProcessEnv => ({
  KMS_API_URL: emu.url,
  KMS_API_KEY: API_KEY,
  SOPS_AGE_KEY_FILE: path.join(dir, 'age.txt'),
  ...extra,
});

interface Event {
  type: string;
  message: string;
  change?: { address: string; action: string };
  changes?: Record<string, number>;
  outcome?: string;
  exit_code?: number;
  keys_stored?: number;
  failed?: unknown[];
  not_attempted?: string[];
}
/** Ids differ between the two services. */
const UUID = /[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/g;
const events = (stdout: string) =>
  stdout
    .replace(UUID, 'ID')
    .split('\n')
    .filter(Boolean)
    .map((l) => JSON.parse(l) as Event);
/** What a run did, without its order (parts are applied one after the other, requests in parallel). */
const digest = (stdout: string) => {
  const ev = events(stdout);
  const of = (type: string) =>
    ev
      .filter((e) => e.type === type)
      .map((e) => `${e.change?.address ?? ''} ${e.change?.action ?? ''} ${e.type === 'diagnostic' ? e.message : ''}`)
      .sort();
  const summary = ev.find((e) => e.type === 'apply_summary');
  return {
    planned: of('planned_change'),
    totals: ev.find((e) => e.type === 'change_summary')?.changes,
    diagnostics: of('diagnostic'),
    applied: of('apply_complete'),
    errored: of('apply_errored'),
    keysStored: ev.filter((e) => e.type === 'key_stored').length,
    summary: summary && {
      outcome: summary.outcome,
      exit: summary.exit_code,
      changes: summary.changes,
      keys: summary.keys_stored,
      notAttempted: [...(summary.not_attempted ?? [])].sort(),
    },
  };
};
/** The live state as the next plan sees it (every id differs between the two services: its text, the URL aside). */
const nextPlan = async (emu: RunningEmulator, dir: string) => {
  const r = await runCli(['plan', '-f', 'kms.yaml', '--no-secret-check'], { cwd: dir, env: envFor(emu, dir) });
  return { code: r.code, text: r.stdout.replaceAll(emu.url, 'URL').replace(UUID, 'ID') };
};

describe('apply environment by environment', () => {
  it(
    'gives the result and the events of the whole plan on random fleets',
    async () => {
      let applied = 0;
      for (let seed = 11; seed <= 15; seed++) {
        const yaml = randomFleet(seed, `r${seed}`, (req) => whole.service.seed(req));
        expect(randomFleet(seed, `r${seed}`, (req) => streamed.service.seed(req))).toBe(yaml);
        // Odd seeds with a low --max-deletes: the guard holds the fleet's deletes, or not, alike.
        const guard = seed % 2 === 1 ? ['--max-deletes', '0'] : [];
        const runs = await Promise.all(
          (
            [
              [whole, {}],
              [streamed, STREAM],
            ] as const
          ).map(async ([emu, extra]) => {
            const dir = workspace({ 'kms.yaml': yaml });
            const r = await runCli(['apply', '-f', 'kms.yaml', '--auto-approve', '--json', ...guard], {
              cwd: dir,
              env: envFor(emu, dir, extra),
            });
            return { r, after: await nextPlan(emu, dir) };
          }),
        );
        const [a, b] = runs as [(typeof runs)[0], (typeof runs)[0]];
        const [got, want] = [digest(b.r.stdout), digest(a.r.stdout)];
        // The deletion guard counted the whole fleet alike (the deletes held, or none).
        const heldLine = (text: string) => /Deletes held: .*/.exec(text)?.[0];
        expect(heldLine(b.r.stderr), `seed ${seed}`).toBe(heldLine(a.r.stderr));
        if (want.errored.length > 0) {
          // A failure stops the whole plan after the phase that had it, and a plan applied part by
          // part after the part that had it (docs/performance.md): the same failures, both refused or partial.
          expect(got.errored, `seed ${seed}`).toEqual(want.errored);
          expect(got.planned, `seed ${seed}`).toEqual(want.planned);
          expect(b.r.code, `seed ${seed}`).not.toBe(0);
          continue;
        }
        expect(got, `seed ${seed}`).toEqual(want);
        expect(b.r.code, `seed ${seed}: ${b.r.stderr}`).toBe(a.r.code);
        expect(b.after, `seed ${seed}`).toEqual(a.after);
        if (digest(a.r.stdout).applied.length > 0) applied++;
      }
      // The fleets exercised the apply (the guard over a whole fleet: the next test).
      expect(applied).toBeGreaterThan(2);
    },
    patient(240_000),
  );

  const fleet = (clients: number, extra = '') =>
    [
      'apiVersion: kms-sync/v1',
      'owner: streamed',
      'projects:',
      ...['sa', 'sb'].flatMap((p) => [
        `  - slug: ${p}`,
        `    name: ${p}`,
        '    environments:',
        ...['prod', 'stage'].flatMap((t) => [
          `      - type: ${t}`,
          '        url: https://api.example.test',
          '        templates: [{ name: std, rateLimitDay: 1000 }]',
          '        clients:',
          ...Array.from(
            { length: clients },
            (_, i) => `          - { name: c${i}, template: std, keys: [{ name: primary }]${extra} }`,
          ),
        ]),
      ]),
    ].join('\n') + '\n';

  it(
    'confirms from the whole fleet, guards its deletes as one, and stops a part that moved before its apply',
    async () => {
      const dir = workspace({ 'kms.yaml': fleet(4) });
      const env = envFor(streamed, dir, STREAM);
      const cli = (args: string[]) => runCli(args, { cwd: dir, env });

      // The question comes after the whole fleet's totals: 2 projects, 4 environments, 4 templates, 16 clients.
      const no = await runInTty(cliCommand(['apply', '-f', 'kms.yaml']), { cwd: dir, env, answer: 'no' });
      expect(no.code, no.output).toBe(1);
      const beforeQuestion = no.output.slice(0, no.output.indexOf('Do you want to perform these actions?'));
      expect(beforeQuestion).toContain('Plan: 26 to create, 0 to update, 0 to replace, 0 to rotate, 0 to delete.');
      expect(beforeQuestion).toMatch(/16 {2}create client {7}sa-prod 4, sa-stage 4, sb-prod 4, sb-stage 4/);
      expect(no.output).toContain('Apply cancelled.');
      expect((await cli(['plan', '-f', 'kms.yaml', '--detailed-exitcode'])).code, 'nothing applied').toBe(2);

      const first = await cli(['apply', '-f', 'kms.yaml', '--auto-approve']);
      expect(first.code, first.stderr).toBe(0);
      // A complete run keeps the inventory (engine/inventory.ts): every client it created is in it.
      const inventoryFile = path.join(dir, '.kms-sync', 'inventory.json');
      const inventoryText = readFileSync(inventoryFile, 'utf8');
      for (const pe of ['sa-prod', 'sa-stage', 'sb-prod', 'sb-stage'])
        for (let i = 0; i < 4; i++) expect(inventoryText).toContain(`client.${pe}/c${i}`);
      expect((await cli(['plan', '-f', 'kms.yaml', '--detailed-exitcode'])).code).toBe(0);

      // Two clients leave each environment: 8 deletes over the fleet, 2 in each. --max-deletes 5
      // holds all of them (no environment alone exceeds it); the rest of the plan is applied.
      writeFileSync(path.join(dir, 'kms.yaml'), fleet(2, ', ipWhitelist: [10.0.0.0/8]'));
      const guarded = await cli(['apply', '-f', 'kms.yaml', '--auto-approve', '--max-deletes', '5']);
      expect(guarded.code, guarded.stdout + guarded.stderr).toBe(1);
      expect(guarded.stdout).toContain(
        'Deletes held: 8 deletes or revokes exceed the deletion guard (at most 5 at once)',
      );
      expect(guarded.stdout).toContain(
        'Apply complete! Resources: 0 created, 8 updated, 0 replaced, 0 rotated, 0 destroyed.',
      );
      const left = await cli(['plan', '-f', 'kms.yaml', '--compact']);
      expect(left.stdout).toContain('Plan: 0 to create, 0 to update, 0 to replace, 0 to rotate, 8 to delete.');

      // Only the held deletes are left: nothing is applied, said so (not "stopped part-way"), and the
      // inventory is written from the first pass's read of every environment, as a whole apply's.
      rmSync(inventoryFile);
      const heldOnly = await cli(['apply', '-f', 'kms.yaml', '--auto-approve', '--max-deletes', '5']);
      expect(heldOnly.code, heldOnly.stdout + heldOnly.stderr).toBe(1);
      expect(heldOnly.stdout).toContain(
        'Nothing else is planned: nothing is applied. To approve the deletes, run again with --max-deletes 8.',
      );
      expect(heldOnly.stdout + heldOnly.stderr).not.toMatch(/part-way|rest of the plan/);
      for (const pe of ['sa-prod', 'sa-stage', 'sb-prod', 'sb-stage'])
        for (let i = 0; i < 4; i++) expect(readFileSync(inventoryFile, 'utf8')).toContain(`client.${pe}/c${i}`);

      const inventoryBefore = readFileSync(inventoryFile, 'utf8');
      // While the run waits for its answer, a client of sb-prod is deleted outside: that
      // environment's plan is no longer the one confirmed, so it is not applied; the others are.
      const moved = await runInTty(cliCommand(['apply', '-f', 'kms.yaml', '--max-deletes', '8']), {
        cwd: dir,
        env,
        answer: 'yes',
        beforeAnswer: async () => {
          const headers = { 'x-api-key': API_KEY };
          const list = (await (
            await fetch(`${streamed.url}/client?project_env=sb-prod&limit=100`, { headers })
          ).json()) as { data: { id: string; name: string }[] };
          const c0 = list.data.find((c) => c.name === 'c0')!;
          const del = await fetch(`${streamed.url}/client/${c0.id}?project_env=sb-prod`, { method: 'DELETE', headers });
          expect(del.status).toBeLessThan(300);
        },
      });
      expect(moved.code, moved.output).toBe(3);
      expect(moved.output).toMatch(
        /1 part\(s\) of the plan changed between the plan and its apply and were not applied \(sb-prod: the live state changed since the plan \(2 operation\(s\) confirmed, 3 now\)\)/,
      );
      expect(moved.output).toContain('Resources: 0 created, 0 updated, 0 replaced, 0 rotated, 6 destroyed.');
      // Stopped part-way: the inventory is left as it was, said so.
      expect(moved.output).toContain('was left as it was (the run stopped part-way)');
      expect(readFileSync(inventoryFile, 'utf8')).toBe(inventoryBefore);
      // sb-prod untouched (its two clients that left are still there, c0 is missing); the next apply converges.
      const after = await cli(['plan', '-f', 'kms.yaml', '--compact']);
      expect(after.stdout).toMatch(/1 {2}create client {7}sb-prod 1/);
      expect(after.stdout).toMatch(/2 {2}delete client {7}sb-prod 2/);
      const again = await cli(['apply', '-f', 'kms.yaml', '--auto-approve']);
      expect(again.code, again.stderr).toBe(0);
      expect((await cli(['plan', '-f', 'kms.yaml', '--detailed-exitcode'])).code).toBe(0);
    },
    patient(180_000),
  );
  it(
    'rotate, its configuration loaded environment by environment, prints what the whole load prints',
    async () => {
      // The same fleet applied to both services; then the same rotations, loaded whole on one
      // (KMS_SYNC_CONFIG_WHOLE=1) and environment by environment on the other.
      const dirs = [whole, streamed].map((emu) => ({ emu, dir: workspace({ 'kms.yaml': fleet(3) }) }));
      for (const { emu, dir } of dirs) {
        const r = await runCli(['apply', '-f', 'kms.yaml', '--auto-approve'], { cwd: dir, env: envFor(emu, dir) });
        expect(r.code, r.stderr).toBe(0);
      }
      const comparable = (emu: RunningEmulator, dir: string, r: { code: number; stdout: string; stderr: string }) => {
        const clean = (t: string) =>
          t
            .replaceAll(emu.url, 'URL')
            .replaceAll(dir, 'DIR')
            .replace(/\d{4}-\d\d-\d\dT[\d:.]+Z/g, 'TIME')
            .replace(UUID, 'ID')
            .replace(/Took [\d.]+m?s/g, 'Took …')
            .replace(/"(?:generatedAt|generated_at|timestamp|@timestamp)":\s*"[^"]+"/g, '"t": "…"');
        // Each key's events come as its writes finish, concurrently across environments: compared as a set.
        return { code: r.code, stdout: clean(r.stdout), stderr: clean(r.stderr).split('\n').sort().join('\n') };
      };
      for (const args of [
        ['rotate', '-f', 'kms.yaml', '--key', 'key.sa-prod/c1/primay', '--auto-approve'],
        ['rotate', '-f', 'kms.yaml', '--key', 'key.sa-*/c1/*', '--auto-approve'],
        ['rotate', '-f', 'kms.yaml', '--key', 'key.*/c0/*', '--auto-approve', '--shard', '1/2'],
        ['rotate', '-f', 'kms.yaml', '--key', 'key.*/c0/*', '--auto-approve', '--shard', '2/2', '--json'],
      ]) {
        const [a, b] = await Promise.all(
          dirs.map(({ emu, dir }) =>
            runCli(args, {
              cwd: dir,
              env: envFor(emu, dir, emu === whole ? { KMS_SYNC_CONFIG_WHOLE: '1' } : {}),
            }).then((r) => comparable(emu, dir, r)),
          ),
        );
        expect(b, args.join(' ')).toEqual(a);
      }
      expect(dirs.length).toBe(2);
    },
    patient(120_000),
  );
});
