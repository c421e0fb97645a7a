// What a plan shows people (text and Markdown) against the emulator: each new key's lifetime and
// rotation, the keys a client delete (or a rename, which deletes the old client) revokes, and
// none of kms-sync's internal markers, which the JSON keeps.
import { writeFileSync } from 'node:fs';
import { rmSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { allOutput, RAW_KEY_PATTERN, runCli } from '../support/cli.js';
import { setup, type Setup } from './helpers.js';

const config = (client: string) => `apiVersion: kms-sync/v1
projects:
  - slug: shop
    name: Shop
    environments:
      - type: staging
        url: https://s.example
        templates: [{ name: std, rateLimitDay: 10 }]
        clients:
          - name: ${client}
            template: std
            metadata: { team: payments }
            keys:
              - { name: main, ttl: 30d, autoRotate: true, rotation: { window: 7d, overlap: 1d } }
              - { name: backup, expiresAt: "2031-01-01T00:00:00Z" }
`;

let s: Setup;
beforeAll(async () => {
  s = await setup({ 'kms-sync.yaml': config('web') });
});
afterAll(async () => {
  await s?.emu.close();
  rmSync(s.dir, { recursive: true, force: true });
  for (const text of allOutput) expect(text).not.toMatch(RAW_KEY_PATTERN);
});
const cli = (args: string[]) => runCli(args, { cwd: s.dir, env: s.env });
const MARKERS = /kms-sync\/applied|kms-sync\/owner|managed-by/;

describe('plan details', () => {
  it('a new client shows each key with its ttl or expiry, autoRotate and rotation; markers only in JSON', async () => {
    const text = await cli(['plan']);
    expect(text.code, text.stderr).toBe(0);
    expect(text.stdout).toContain(
      'main: ttl 30d, autoRotate true, rotation window 7d / overlap 1d; raw value → default store:shop-staging/web/main',
    );
    expect(text.stdout).toContain(
      'backup: expires 2031-01-01T00:00:00.000Z, autoRotate false; raw value → default store:shop-staging/web/backup',
    );
    expect(text.stdout).toContain('metadata = { team = "payments" }');
    expect(text.stdout).not.toMatch(MARKERS);
    const md = await cli(['plan', '--format', 'markdown']);
    expect(md.stdout).toContain('ttl 30d, autoRotate true, rotation window 7d / overlap 1d');
    expect(md.stdout).not.toMatch(MARKERS);
    const json = await cli(['plan', '--json']);
    const create = JSON.parse(json.stdout).resource_changes.find(
      (c: { address: string }) => c.address === 'client.shop-staging/web',
    );
    expect(create.change.after.metadata).toMatchObject({
      team: 'payments',
      'managed-by': 'kms-sync',
      'kms-sync/owner': expect.any(String),
      'kms-sync/applied': expect.any(String),
    });
    expect(create.change.after.keys.find((k: { name: string }) => k.name === 'main')).toMatchObject({
      name: 'main',
      ttl: '30d',
      autoRotate: true,
      rotation: { window: '7d', overlap: '1d' },
    });
  });

  it('a rename deletes the old client and says which keys that revokes', async () => {
    expect((await cli(['apply', '--yes'])).code).toBe(0);
    writeFileSync(path.join(s.dir, 'kms-sync.yaml'), config('storefront'));
    const text = await cli(['plan']);
    expect(text.code, text.stderr).toBe(0);
    expect(text.stdout).toContain('# client.shop-staging/web will be destroyed');
    expect(text.stdout).toContain('(revokes its 2 key(s): backup, main)');
    expect(text.stdout).not.toMatch(MARKERS);
    const md = await cli(['plan', '--format', 'markdown']);
    expect(md.stdout).toContain('revoked: <code>backup</code>, <code>main</code>');
    expect(md.stdout).not.toMatch(MARKERS);
    const json = JSON.parse((await cli(['plan', '--json'])).stdout);
    const del = json.resource_changes.find((c: { address: string }) => c.address === 'client.shop-staging/web');
    expect(del.change.before.keys).toEqual(['backup', 'main']);
    expect(del.change.before.metadata).toMatchObject({ 'kms-sync/applied': expect.any(String) });
  });
});
