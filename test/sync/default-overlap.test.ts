// The default overlap also holds for generations rotated while an overlap was configured: once the
// overlap is removed from the configuration, an older generation with no expiry must not stay live
// forever with nobody holding its raw value (a stray the crash campaign found, seed 357657589).
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startEmulator, type RunningEmulator } from '../../src/emulator/index.js';
import { allOutput, RAW_KEY_PATTERN, runCli, workspace, writeFiles } from '../support/cli.js';

const API_KEY = 'sk_test_defaultoverlap0123456';
const WEEK = 7 * 86_400_000;

const config = (key: string) => `apiVersion: kms-sync/v1
projects:
  - slug: ovl
    name: Overlap
    environments:
      - type: production
        url: https://ovl.example
        templates: [{ name: std, rateLimitDay: 1000, maxClients: 20 }]
        clients:
          - name: acme
            template: std
            keys:
              - ${key}
`;

let emu: RunningEmulator;
let dir: string;
let env: NodeJS.ProcessEnv;
const headers = { 'x-api-key': API_KEY, 'content-type': 'application/json' };
const acme = async () =>
  ((await (await fetch(`${emu.url}/client?project_env=ovl-production&name=acme`, { headers })).json()) as any).data[0];
const cli = (args: string[]) => runCli(args, { env, cwd: dir });

beforeAll(async () => {
  emu = await startEmulator({ port: 0, apiKeys: [API_KEY] });
  dir = workspace({ 'config/main.yaml': config('{ name: main, rotation: { overlap: 1h } }') });
  env = { KMS_API_URL: emu.url, KMS_API_KEY: API_KEY, SOPS_AGE_KEY_FILE: path.join(dir, 'age', 'keys.txt') };
});

afterAll(async () => {
  await emu?.close();
  for (const text of allOutput) expect(text).not.toMatch(RAW_KEY_PATTERN);
});

describe('the default overlap after the configured overlap is removed', () => {
  it('brings the expiry of an older generation forward to 7 days after its successor', async () => {
    expect((await cli(['apply', '-f', 'config', '--auto-approve'])).code).toBe(0);
    const rotated = await cli(['rotate', '-f', 'config', '--key', 'key.ovl-production/acme/main', '--auto-approve']);
    expect(rotated.code, rotated.stdout + rotated.stderr).toBe(0);
    const [old, current] = (await acme()).keys as { id: string; expiresAt?: string | null; createdAt: string }[];
    expect(old!.expiresAt ?? null).toBeNull(); // kept by the 1h overlap, revoked by a later apply

    writeFiles(dir, { 'config/main.yaml': config('{ name: main }') });
    const plan = JSON.parse((await cli(['plan', '-f', 'config', '--json'])).stdout);
    const until = new Date(Date.parse(current!.createdAt) + WEEK).toISOString();
    expect(plan.resource_changes.map((c: any) => [c.address, c.change.action, c.change.action_reason])).toEqual([
      ['key.ovl-production/acme/main', 'update', 'expire_rotated_out'],
    ]);
    const drift = JSON.parse((await cli(['drift', '-f', 'config', '--json'])).stdout);
    expect(
      drift.items.map((i: any) => [
        i.category,
        i.address,
        i.planned_action,
        i.fields.map((f: any) => [f.path, f.desired]),
      ]),
    ).toEqual([['pending', 'key.ovl-production/acme/main', 'update', [['expiresAt', until]]]]);

    const applied = await cli(['apply', '-f', 'config', '--auto-approve']);
    expect(applied.code, applied.stdout + applied.stderr).toBe(0);
    const keys = (await acme()).keys as { id: string; expiresAt?: string | null }[];
    expect(keys.map((k) => k.id)).toEqual([old!.id, current!.id]);
    expect(Date.parse(keys[0]!.expiresAt!)).toBe(Date.parse(until));
    expect(keys[1]!.expiresAt ?? null).toBeNull(); // the current key is not touched

    const again = await cli(['plan', '-f', 'config', '--detailed-exitcode']);
    expect(again.code, again.stdout).toBe(0);
  });
});
