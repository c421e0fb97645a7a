// plan and drift start reading the live state once the configuration is parsed (engine/run.ts
// ReadAhead). That read is used only when it is the read planFor would make: the same scope, and
// no journal waiting for recovery. Checked here against the emulator over HTTP, and through the
// CLI for the user-visible parts.
import { mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ReadAhead, connect, loadConfig } from '../../src/engine/run.js';
import { collectLiveStream, readLiveState } from '../../src/live/read.js';
import { allOutput, RAW_KEY_PATTERN, runCli, workspace } from '../support/cli.js';
import { setup, type Setup } from './helpers.js';
import { patient } from '../support/patience.js';

const twoEnvs = `apiVersion: kms-sync/v1
owner: read-ahead
projects:
  - slug: shop
    name: Shop
    environments:
      - type: staging
        url: https://s.example
        templates: [{ name: std, rateLimitDay: 10 }]
        clients: [{ name: web, template: std, keys: [{ name: main }] }]
      - type: production
        url: https://p.example
        templates: [{ name: std, rateLimitDay: 10 }]
        clients: [{ name: app, template: std, keys: [{ name: main }] }]
`;

let s: Setup;
beforeAll(async () => {
  s = await setup({ 'kms-sync.yaml': twoEnvs });
  const applied = await runCli(['apply', '--yes'], { cwd: s.dir, env: s.env });
  expect(applied.code, applied.stderr).toBe(0);
}, patient(60_000));
afterAll(async () => {
  await s?.emu.close();
  for (const text of allOutput) expect(text).not.toMatch(RAW_KEY_PATTERN);
});

/** loadConfig as the CLI runs it, in the workspace (file paths are relative to the working folder). */
async function loadIn(dir: string, env: string[], ahead: ReadAhead) {
  const cwd = process.cwd();
  process.chdir(dir);
  try {
    return await loadConfig({ file: ['kms-sync.yaml'], env }, ahead);
  } finally {
    process.chdir(cwd);
  }
}

const connection = () =>
  connect({ url: s.emu.url, parallelism: 4 }, { KMS_API_URL: s.emu.url, KMS_API_KEY: s.env.KMS_API_KEY });

describe('ReadAhead', () => {
  it('hands over a read of exactly the loaded scope, equal to the read planFor makes', async () => {
    const conn = connection();
    try {
      const cfg = await loadIn(s.dir, [], new ReadAhead(conn, false));
      expect(cfg.live, 'a read was started and handed over').toBeDefined();
      const ahead = await collectLiveStream(cfg.live!.stream);
      const direct = await readLiveState(
        conn.api,
        { projects: ['shop'], envs: ['shop-production', 'shop-staging'], alsoRead: cfg.leaving },
        { fingerprints: false },
      );
      expect(ahead.state).toEqual(direct.state);
      expect(ahead.state.clients.map((c) => `${c.projectEnv}/${c.name}`).sort()).toEqual([
        'shop-production/app',
        'shop-staging/web',
      ]);
    } finally {
      await conn.api.close();
    }
  });

  it('narrows to --env like the plan does, and hands nothing over for another scope', async () => {
    const conn = connection();
    try {
      const cfg = await loadIn(s.dir, ['*-staging'], new ReadAhead(conn, false));
      expect(cfg.desired.envs.map((e) => e.projectEnv)).toEqual(['shop-staging']);
      const read = await collectLiveStream(cfg.live!.stream);
      expect(read.state.envs.map((e) => e.projectEnv)).toEqual(['shop-staging']);

      // Started for one scope, asked for another (the documents said more than the loaded state keeps).
      const other = new ReadAhead(conn, false);
      other.start(
        [
          {
            projects: [
              {
                slug: 'shop',
                name: 'Shop',
                environments: [
                  { type: 'staging', url: 'x' },
                  { type: 'qa', url: 'y' },
                ],
              },
            ],
          },
        ],
        s.dir,
        [],
      );
      expect(other.take(cfg.desired, ['shop-staging', 'shop-production'])).toBeUndefined();
    } finally {
      await conn.api.close();
    }
  });

  it('starts nothing while a journal waits for recovery: recovery comes before any read', async () => {
    const dir = workspace({ 'kms-sync.yaml': twoEnvs });
    mkdirSync(path.join(dir, '.kms-sync'), { recursive: true });
    writeFileSync(path.join(dir, '.kms-sync', 'journal'), '');
    const conn = connection();
    try {
      const ahead = new ReadAhead(conn, false);
      ahead.start(
        [{ projects: [{ slug: 'shop', name: 'Shop', environments: [{ type: 'staging', url: 'x' }] }] }],
        dir,
        [],
      );
      expect(
        ahead.take(
          {
            projects: [{ slug: 'shop', name: 'Shop' }],
            envs: [{ project: 'shop', type: 'staging', projectEnv: 'shop-staging', url: 'x' }],
            templates: [],
            clients: [],
            endpoints: [],
            stores: [],
          },
          ['shop-staging'],
        ),
      ).toBeUndefined();
    } finally {
      await conn.api.close();
    }
  });
});

describe('plan with the read ahead, as a user runs it', () => {
  it('an invalid configuration with a reachable service: the configuration errors, exit 1, promptly', async () => {
    const dir = workspace({
      'kms-sync.yaml': twoEnvs.replace(
        'rateLimitDay: 10 }]\n        clients: [{ name: app',
        'rateLimitDay: ten }]\n        clients: [{ name: app',
      ),
    });
    const started = Date.now();
    const r = await runCli(['plan'], { cwd: dir, env: s.env });
    expect(r.code, r.stderr).toBe(1);
    expect(r.stderr).toMatch(/kms-sync\.yaml:\d+:\d+: .*rateLimitDay: must be an integer/);
    expect(r.stderr).not.toMatch(/Reading live state/);
    // The read started ahead does not hold the process open (its connection is closed). 8 s on a
    // quiet machine, scaled to the load (a process start takes that many times longer), at most 25 s.
    expect(Date.now() - started).toBeLessThan(Math.min(patient(8_000), 25_000));
  });

  it('a no-op plan after apply is empty, with or without --env', async () => {
    for (const args of [
      ['plan', '--detailed-exitcode'],
      ['plan', '--detailed-exitcode', '--env', 'shop-staging'],
    ]) {
      const r = await runCli(args, { cwd: s.dir, env: s.env });
      expect(r.code, `${args.join(' ')}: ${r.stdout}${r.stderr}`).toBe(0);
    }
  });
});
