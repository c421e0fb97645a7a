// Output for long runs: --compact counts instead of every resource, timestamps on CI log lines,
// the time an apply took.
import { afterAll, beforeAll, expect, it } from 'vitest';
import { allOutput, RAW_KEY_PATTERN, runCli } from '../support/cli.js';
import { setup, type Setup } from './helpers.js';

const CLIENTS = 30;
const config = `apiVersion: kms-sync/v1
projects:
  - slug: wide
    name: Wide
    environments:
${['staging', 'production']
  .map(
    (t) => `      - type: ${t}
        url: https://${t}.example
        templates: [{ name: std, rateLimitDay: 10 }]
        clients:
${Array.from({ length: CLIENTS }, (_, i) => `          - { name: c${i}, template: std, keys: [{ name: main }] }`).join('\n')}`,
  )
  .join('\n')}
`;

let s: Setup;
beforeAll(async () => {
  s = await setup({ 'kms-sync.yaml': config });
});
afterAll(async () => {
  await s?.emu.close();
  for (const text of allOutput) expect(text).not.toMatch(RAW_KEY_PATTERN);
});

it('plan --compact prints counts per action, kind and environment, not a block per resource', async () => {
  const r = await runCli(['plan', '--compact'], { cwd: s.dir, env: s.env });
  expect(r.code, r.stderr).toBe(0);
  expect(r.stdout).toMatch(
    new RegExp(`\\s${CLIENTS * 2}\\s+create client\\s+wide-production ${CLIENTS}, wide-staging ${CLIENTS}`),
  );
  expect(r.stdout).not.toContain('client.wide-staging/c7');
  expect(r.stdout).toContain(`Plan: ${CLIENTS * 2 + 5} to create`);
  expect(r.stdout.split('\n').length).toBeLessThan(20);
});

it('apply --compact in CI: timestamped log lines, a short key summary, and the time it took', async () => {
  const r = await runCli(['apply', '--compact', '--yes'], {
    cwd: s.dir,
    env: { ...s.env, CI: 'true', KMS_SYNC_ALLOW_LOCAL_STORE: '1' },
  });
  expect(r.code, r.stderr).toBe(0);
  const lines = r.stderr.split('\n').filter((l) => l.includes('complete'));
  expect(lines.length).toBeGreaterThan(CLIENTS);
  for (const l of lines) expect(l).toMatch(/^\[\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z\] \S+: create complete/);
  expect(r.stdout).toContain(`Keys issued and stored: ${CLIENTS * 2}, in `);
  expect(r.stdout).not.toContain('key.wide-staging/c7/main →');
  expect(r.stdout).toMatch(/Took \d+s\./);
});

it('--compact with --json is a usage error', async () => {
  const r = await runCli(['apply', '--compact', '--json', '--yes'], { cwd: s.dir, env: s.env });
  expect(r.code).toBe(1);
  expect(r.stderr).toContain('--json and --compact');
});
