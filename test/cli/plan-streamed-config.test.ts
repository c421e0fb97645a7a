// `plan`, `drift` (with --shard too) and `validate` load a configuration environment by environment (config/load.ts
// loadDesiredStateStreamed): each environment's clients and endpoints are read, checked and built
// as it is planned. Whatever only a whole load says as it should (a problem to place, a warning,
// input outside the fast YAML subset, in any environment) makes the command load it whole
// (engine/run.ts streamedOrWhole): the built CLI's output, exit code and files must be those of
// KMS_SYNC_CONFIG_WHOLE=1 (the whole load, as before) on each configuration below.
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { allOutput, RAW_KEY_PATTERN, runCli, workspace } from '../support/cli.js';
import { setup, type Setup } from './helpers.js';
import { patient } from '../support/patience.js';

const head = `apiVersion: kms-sync/v1
owner: streamed
stores:
  - { name: vault, uri: "file:./vault.sops.json" }
projects:
`;

/** One project of `envs` environments; `body(e)` is environment e's clients (and endpoints) block. */
const project = (slug: string, envs: number, body: (e: number) => string) =>
  `  - slug: ${slug}
    name: ${slug}
    environments:
${Array.from(
  { length: envs },
  (_, e) => `      - type: env${e}
        url: https://${slug}.example
        templates:
          - name: std
            rateLimitDay: 10
          - { name: small, rateLimitDay: 5, maxClients: 3 }
${body(e)}`,
).join('')}`;

const clients = (names: string[], extra = '') =>
  `        clients:
${names.map((n) => `          - name: ${n}\n            template: std\n            keys: [{ name: main }]\n${extra}`).join('')}`;

const endpoints = `        endpoints:
          - method: GET
            path: /a
`;

const plain = (e: number) => clients([`c${e}-a`, `c${e}-b`]) + endpoints;

/** Configurations: the ones that stream, and one for each reason to load the whole. */
const cases: Record<string, Record<string, string>> = {
  // One configuration for all that streams (each its own part of it; 8 runs each way, not 16): two
  // projects, several environments, clients and endpoints; an indentless list with comments and a
  // blank line; an environment split over two files.
  'streams: two projects, several environments, an indentless list, comments, an environment split over two files': {
    'kms-sync.yaml':
      head +
      project('shop', 3, (e) =>
        e === 2
          ? plain(e)
          : `        clients:\n        # the first\n        - name: x${e}\n          template: std\n\n        - name: y${e}\n          template: std\n`,
      ) +
      project('blog', 2, (e) => clients([`b${e}`])),
    'more.yaml': `apiVersion: kms-sync/v1\nowner: streamed\nprojects:\n  - slug: shop\n    environments:\n      - type: env1\n${clients(['z1'])}`,
  },
  'error: an undefined template in the last environment': {
    'kms-sync.yaml':
      head +
      project('shop', 3, (e) => (e === 2 ? clients(['late']).replace('template: std', 'template: stdd') : plain(e))),
  },
  'error: a client defined twice over two files': {
    'kms-sync.yaml': head + project('shop', 2, plain),
    'more.yaml': `apiVersion: kms-sync/v1\nowner: streamed\nprojects:\n  - slug: shop\n    environments:\n      - type: env1\n${clients(['c1-a'])}`,
  },
  'error: the schema refuses a client field, and a bad CIDR': {
    'kms-sync.yaml':
      head +
      project('shop', 2, (e) =>
        e === 1 ? clients(['x'], '            colour: blue\n            ipWhitelist: [10.0.0.300/8]\n') : plain(e),
      ),
  },
  'error: an undeclared store': {
    'kms-sync.yaml':
      head +
      project('shop', 2, (e) =>
        e === 1 ? clients(['x']).replace('{ name: main }', '{ name: main, secret: { store: vaultt } }') : plain(e),
      ),
  },
  'error: two keys of two environments write one secret': {
    'kms-sync.yaml':
      head +
      project('shop', 2, (e) =>
        clients([`c${e}`]).replace('{ name: main }', '{ name: main, secret: { store: vault, name: shared } }'),
      ),
  },
  'warning: a template over its maxClients': {
    'kms-sync.yaml':
      head +
      project('shop', 2, (e) =>
        e === 1 ? clients(['p', 'q', 'r', 's']).replaceAll('template: std', 'template: small') : plain(e),
      ),
  },
  'outside the fast subset: an anchor in a client': {
    'kms-sync.yaml':
      head + project('shop', 2, (e) => (e === 1 ? clients(['x'], '            metadata: &m { a: b }\n') : plain(e))),
  },
  'an unset variable in a client': {
    'kms-sync.yaml':
      head +
      project('shop', 2, (e) =>
        e === 1 ? clients(['x'], '            metadata: { team: "${env:KMS_STREAMED_TEAM}" }\n') : plain(e),
      ),
  },
};

let s: Setup;
beforeAll(async () => {
  s = await setup({});
}, patient(60_000));
afterAll(async () => {
  await s?.emu.close();
  for (const text of allOutput) expect(text).not.toMatch(RAW_KEY_PATTERN);
});

/** The run's output with the plan's time blanked (two runs differ only there). */
const comparable = (r: { code: number; stdout: string; stderr: string }) => ({
  code: r.code,
  stdout: r.stdout.replace(/"(?:generatedAt|generated_at)":\s*"[^"]+"/g, '"generated_at": "…"'),
  stderr: r.stderr,
});

describe('plan, drift and validate, configuration loaded environment by environment', () => {
  for (const [name, files] of Object.entries(cases)) {
    it(
      `prints what the whole load prints: ${name}`,
      async () => {
        const dir = workspace(files);
        const env = { ...s.env, SOPS_AGE_KEY_FILE: path.join(dir, 'age.txt') };
        for (const args of [
          ['plan', '-f', '.', '--no-secret-check'],
          ['plan', '-f', '.', '--no-secret-check', '--json', '--out', 'plan.json', '--env', 'shop-env0'],
          // A shard: only its environments' clients are read (the others are checked as they are let go).
          ['plan', '-f', '.', '--no-secret-check', '--shard', '1/2'],
          ['plan', '-f', '.', '--no-secret-check', '--shard', '2/2', '--json'],
          // validate, drift and rotate load it as plan does (drift's report, --shard too).
          ['validate', '-f', '.'],
          ['validate', '-f', '.', '--env', 'shop-env1'],
          ['drift', '-f', '.', '--no-secret-check', '--no-usage'],
          ['drift', '-f', '.', '--no-secret-check', '--no-usage', '--json', '--shard', '1/2'],
        ]) {
          const streamed = await runCli(args, { cwd: dir, env });
          const savedStreamed =
            streamed.code === 0 && args.includes('--out') ? readFileSync(path.join(dir, 'plan.json'), 'utf8') : '';
          const whole = await runCli(args, { cwd: dir, env: { ...env, KMS_SYNC_CONFIG_WHOLE: '1' } });
          const savedWhole =
            whole.code === 0 && args.includes('--out') ? readFileSync(path.join(dir, 'plan.json'), 'utf8') : '';
          expect(comparable(streamed), `${name}: ${args.join(' ')}`).toEqual(comparable(whole));
          expect(comparable({ code: 0, stdout: savedStreamed, stderr: '' })).toEqual(
            comparable({ code: 0, stdout: savedWhole, stderr: '' }),
          );
          // drift exits 2: the configuration was never applied, everything is missing.
          if (name.startsWith('streams')) expect(streamed.code, streamed.stderr).toBe(args[0] === 'drift' ? 2 : 0);
          // Scoped by --env, a collision with an environment out of scope is not one (as before).
          if (name.startsWith('error') && !args.includes('--env') && !args.includes('--shard')) {
            expect(streamed.code).toBe(1);
            expect(streamed.stderr).toMatch(/(kms-sync|more)\.yaml:\d+:\d+/);
          }
        }
      },
      patient(60_000),
    );
  }
});
