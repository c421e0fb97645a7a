// The ownership inventory (engine/inventory.ts) stays true after `rotate` and `destroy`, not only
// after the next apply: a rotated key keeps its client's entry (same client, same id), and a
// destroy takes out the entries of everything it deleted (clients, environments, project), in the
// sealed copy beside the journal. Built CLI against the emulator over HTTP.
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { allOutput, RAW_KEY_PATTERN, runCli } from '../support/cli.js';
import { patient } from '../support/patience.js';
import { setup, type Setup } from './helpers.js';

const config = `apiVersion: kms-sync/v1
owner: inventory-rd
projects:
  - slug: invrd
    name: invrd
    environments:
${['prod', 'stage']
  .map(
    (t) => `      - type: ${t}
        url: https://api.example.test
        templates: [{ name: std, rateLimitDay: 100 }]
        clients:
          - { name: c0, template: std, keys: [{ name: primary }] }
          - { name: c1, template: std, keys: [{ name: primary }] }
`,
  )
  .join('')}`;

let s: Setup;
beforeAll(async () => {
  s = await setup({ 'kms.yaml': config });
}, patient(60_000));
afterAll(async () => {
  await s?.emu.close();
  for (const text of allOutput) expect(text).not.toMatch(RAW_KEY_PATTERN);
});

interface Entry {
  kind: string;
  address: string;
  id?: string;
}
const entries = (): Entry[] =>
  (JSON.parse(readFileSync(path.join(s.dir, '.kms-sync', 'inventory.json'), 'utf8')) as { entries: Entry[] }).entries;
const cli = (args: string[]) => runCli(args, { cwd: s.dir, env: s.env });

describe('the inventory after rotate and destroy', () => {
  it(
    'keeps a rotated key’s client, and drops what a destroy deleted',
    async () => {
      const applied = await cli(['apply', '-f', 'kms.yaml', '--auto-approve']);
      expect(applied.code, applied.stderr).toBe(0);
      const before = entries();
      const c0 = before.find((e) => e.address === 'client.invrd-prod/c0');
      expect(c0?.id).toBeTruthy();
      expect(before.map((e) => e.address)).toEqual(
        expect.arrayContaining(['project.invrd', 'env.invrd-prod', 'env.invrd-stage', 'client.invrd-stage/c1']),
      );

      const rotated = await cli(['rotate', '-f', 'kms.yaml', '--key', 'key.invrd-prod/c0/primary', '--auto-approve']);
      expect(rotated.code, rotated.stderr).toBe(0);
      expect(entries().find((e) => e.address === 'client.invrd-prod/c0')).toEqual(c0);
      expect(entries().map((e) => e.address)).toEqual(before.map((e) => e.address));

      const destroyed = await cli(['destroy', '-f', 'kms.yaml', '--auto-approve']);
      expect(destroyed.code, destroyed.stdout + destroyed.stderr).toBe(0);
      expect(destroyed.stderr).not.toContain('warning');
      // Everything of this configuration was deleted: nothing of it is left in its inventory.
      expect(entries().map((e) => e.address)).toEqual([]);
      // The next apply makes it all again, and the inventory with it.
      const again = await cli(['apply', '-f', 'kms.yaml', '--auto-approve']);
      expect(again.code, again.stderr).toBe(0);
      expect(entries().map((e) => e.address)).toEqual(before.map((e) => e.address));
    },
    patient(120_000),
  );
});
