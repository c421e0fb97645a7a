// What a run that writes nothing says (issue 39 item 7), and identical failures grouped (item 2):
// a refused apply says "refused: nothing was written", exit 1, never "stopped part-way", and counts
// what it did not attempt on one line; a run that fails the same way for many resources prints
// one line with a count in its summary (text) and one entry with a count (JSON). The built CLI
// against the emulator.
import { rmSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startEmulator, type RunningEmulator } from '../../src/emulator/index.js';
import { allOutput, RAW_KEY_PATTERN, runCli, writeFiles } from '../support/cli.js';
import { setup, TEST_KEY, type Setup } from './helpers.js';

let s: Setup;
let other: RunningEmulator;
beforeAll(async () => {
  s = await setup();
  other = await startEmulator({ port: 0, apiKeys: [TEST_KEY] });
});
afterAll(async () => {
  await s?.emu.close();
  await other?.close();
  if (s) rmSync(s.dir, { recursive: true, force: true });
  for (const text of allOutput) expect(text).not.toMatch(RAW_KEY_PATTERN);
});
const cli = (args: string[], env: NodeJS.ProcessEnv = {}) => runCli(args, { cwd: s.dir, env: { ...s.env, ...env } });

describe('a run that writes nothing', () => {
  it('is refused, exit 1, without "part-way" or a line per resource not attempted (text and JSON)', async () => {
    expect((await cli(['apply', '--yes'])).code).toBe(0);
    // The same folder against another service: its store holds the first service's secrets.
    const text = await cli(['apply', '--yes'], { KMS_API_URL: other.url });
    expect(text.code, text.stdout + text.stderr).toBe(1);
    expect(text.stdout).toContain('Apply refused: nothing was written.');
    expect(text.stdout).toContain('holds the secrets of another service');
    expect(text.stdout).toMatch(/^ {2}\d+ operation\(s\) not attempted$/m);
    expect(text.stdout + text.stderr).not.toMatch(/part-way|: not attempted|Unresolved/);
    const json = await cli(['apply', '--yes', '--json'], { KMS_API_URL: other.url });
    expect(json.code).toBe(1);
    const summary = JSON.parse(json.stdout.trim().split('\n').at(-1)!) as { outcome: string; exit_code: number };
    expect(summary).toMatchObject({ outcome: 'refused', exit_code: 1 });
    const projects = (await (
      await fetch(`${other.url}/project?limit=100`, { headers: { 'x-api-key': TEST_KEY } })
    ).json()) as { data: unknown[] };
    expect(projects.data).toHaveLength(0);
  });
});

describe('identical failures', () => {
  const config = (n: number) => `apiVersion: kms-sync/v1
projects:
  - slug: many
    name: Many
    environments:
      - type: staging
        url: https://m.example
        templates: [{ name: std, rateLimitDay: 10 }]
        clients:
${Array.from({ length: n }, (_, i) => `          - { name: c${i} , template: std }`).join('\n')}
`;
  it('are one line with a count in the summary and one entry with a count in JSON; the stream stops repeating them', async () => {
    const emu = await startEmulator({ port: 0, apiKeys: [TEST_KEY] });
    try {
      writeFiles(s.dir, { 'many/kms-sync.yaml': config(12) });
      emu.addFault({ method: 'POST', route: '/client', mode: 'error', status: 400, times: 1000 });
      const env = { KMS_API_URL: emu.url };
      const text = await cli(['apply', '-f', 'many', '--yes'], env);
      expect(text.code, text.stdout + text.stderr).toBe(3);
      expect(text.stdout).toContain('Apply stopped part-way.');
      expect(text.stdout).toMatch(
        /^ {2}12 operation\(s\) failed: .+ \(client\.many-staging\/c\d+, client\.many-staging\/c\d+, client\.many-staging\/c\d+ and 9 more\)$/m,
      );
      expect(text.stdout).not.toMatch(/^ {2}client\.many-staging\/c\d+: failed/m);
      expect(text.stderr.match(/create FAILED/g) ?? []).toHaveLength(3);
      expect(text.stderr).toContain('further failures with this same error are counted in the summary');
      // Again: the project, environment and template exist now, so the run writes nothing: exit 1, not part-way.
      const again = await cli(['apply', '-f', 'many', '--yes'], env);
      expect(again.code, again.stdout + again.stderr).toBe(1);
      expect(again.stdout).toContain('Apply failed: nothing was written.');
      expect(again.stdout).toMatch(/^ {2}12 operation\(s\) failed: /m);
      expect(again.stdout).not.toMatch(/part-way/);
      const json = await cli(['apply', '-f', 'many', '--yes', '--json'], env);
      expect(json.code).toBe(1);
      const summary = JSON.parse(json.stdout.trim().split('\n').at(-1)!) as {
        outcome: string;
        failed: unknown[];
        failed_groups: { count: number; addresses: string[] }[];
      };
      expect(summary.outcome).toBe('refused');
      expect(summary.failed).toHaveLength(12);
      expect(summary.failed_groups).toHaveLength(1);
      expect(summary.failed_groups[0]!.count).toBe(12);
      expect(summary.failed_groups[0]!.addresses).toHaveLength(10);
    } finally {
      await emu.close();
    }
  });
});
