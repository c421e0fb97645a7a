// The second-service trap (issue 39 item 6), as the user met it: one configuration folder applied
// to a service, then pointed at a second one. `plan` must say beforehand that apply will refuse
// (the store holds the first service's secrets), in text, JSON and Markdown; after the fix the
// refusal suggests (a store file per service), the first service's keys must not silently turn
// into "secret not held": the plan says the secrets sit in the old file and gives the move, and
// after that move both services plan clean. The built CLI against two emulators.
import { execFileSync } from 'node:child_process';
import { existsSync, rmSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { startEmulator, type RunningEmulator } from '../../src/emulator/index.js';
import { allOutput, RAW_KEY_PATTERN, runCli, writeFiles } from '../support/cli.js';
import { setup, TEST_KEY, type Setup } from './helpers.js';
import { patient } from '../support/patience.js';

const CLIENTS = ['web', 'app', 'batch', 'ops', 'edge'];
const config = (stores = '') => `apiVersion: kms-sync/v1
${stores}projects:
  - slug: shop
    name: Shop
    environments:
      - type: staging
        url: https://s.example
        templates: [{ name: std, rateLimitDay: 10 }]
        clients:
${CLIENTS.map((c) => `          - { name: ${c}, template: std, keys: [{ name: main }] }`).join('\n')}
`;
const PER_SERVICE =
  'stores:\n  - { name: main, default: true, uri: "sops:.kms-sync/secrets.${env:KMS_STAGE}.sops.yaml" }\n';

let s: Setup;
let second: RunningEmulator;
beforeAll(async () => {
  s = await setup({ 'kms-sync.yaml': config() });
  second = await startEmulator({ port: 0, apiKeys: [TEST_KEY] });
});
afterAll(async () => {
  await s?.emu.close();
  await second?.close();
  if (s) rmSync(s.dir, { recursive: true, force: true });
  for (const text of allOutput) expect(text).not.toMatch(RAW_KEY_PATTERN);
});
const first = (args: string[], env: NodeJS.ProcessEnv = {}) => runCli(args, { cwd: s.dir, env: { ...s.env, ...env } });
const other = (args: string[], env: NodeJS.ProcessEnv = {}) => first(args, { KMS_API_URL: second.url, ...env });

it(
  "plan warns that apply will refuse a store holding another service's secrets; after a store per service, the keys left in the old file are named with the move, and after it both services plan clean",
  async () => {
    expect((await first(['apply', '--yes'])).code).toBe(0);
    const oldFile = path.join(s.dir, '.kms-sync', 'secrets.sops.yaml');
    expect(existsSync(oldFile)).toBe(true);

    // 1. The second service: the plan says what apply will do about the store, in every format.
    const text = await other(['plan']);
    expect(text.code, text.stderr).toBe(0);
    expect(text.stdout).toMatch(
      /Warning: apply will refuse to issue keys: store sops:\/\/\S+secrets\.sops\.yaml holds the secrets of another service/,
    );
    expect(text.stdout).toContain('move the secrets already in');
    const json = JSON.parse((await other(['plan', '--json'])).stdout) as { warnings: string[] };
    expect(json.warnings.some((w) => w.startsWith('apply will refuse to issue keys: store'))).toBe(true);
    expect((await other(['plan', '--format', 'markdown'])).stdout).toContain('apply will refuse to issue keys');
    const refused = await other(['apply', '--yes']);
    expect(refused.code, refused.stdout + refused.stderr).toBe(1);
    expect(refused.stdout).toContain('Apply refused: nothing was written.');

    // 2. The fix the refusal suggests: a store file per service. The first service's keys stay in
    // the old file: the plan says where they are and how to move them, instead of five bare
    // "secret not held" lines.
    writeFiles(s.dir, { 'kms-sync.yaml': config(PER_SERVICE) });
    const stage = (name: string) => ({ KMS_STAGE: name, KMS_SYNC_ENV_ALLOW: 'KMS_STAGE' });
    const before = await first(['plan', '--detailed-exitcode'], stage('test'));
    expect(before.stdout).toMatch(
      /secret not held: secret shop-staging\/web\/main is not in sops:\/\/\S+secrets\.test\.sops\.yaml; it is in sops:\/\/\S+\/\.kms-sync\/secrets\.sops\.yaml/,
    );
    const move =
      /Warning: 5 key\(s\) have their secret in \S+, not in \S+ where their store is now: .*; move the file: (mv \S+ \S+)$/m.exec(
        before.stdout,
      );
    expect(move, before.stdout).not.toBeNull();
    expect(move![1]).toBe(
      `mv ${path.join('.kms-sync', 'secrets.sops.yaml')} ${path.join('.kms-sync', 'secrets.test.sops.yaml')}`,
    );

    // 3. The move as the plan gives it; then the first service has nothing to do, and the second
    // applies into its own file.
    execFileSync('sh', ['-c', move![1]!], { cwd: s.dir });
    const after = await first(['plan'], stage('test'));
    expect(after.code, after.stdout + after.stderr).toBe(0);
    expect(after.stdout).not.toMatch(/secret not held|apply will refuse|have their secret in/);
    // The new store and the variable are security changes: an apply records them, writing nothing.
    expect(after.stdout).toContain('No resource changes; only the security changes above.');
    const recorded = await first(['apply', '--yes'], stage('test'));
    expect(recorded.code, recorded.stdout + recorded.stderr).toBe(0);
    expect(recorded.stdout).toContain('no resource changed');
    const applied = await other(['apply', '--yes'], stage('live'));
    expect(applied.code, applied.stdout + applied.stderr).toBe(0);
    expect(existsSync(path.join(s.dir, '.kms-sync', 'secrets.live.sops.yaml'))).toBe(true);
    expect((await other(['plan', '--detailed-exitcode'], stage('live'))).code).toBe(0);
    expect((await first(['plan', '--detailed-exitcode'], stage('test'))).code).toBe(0);
  },
  patient(120_000),
);
