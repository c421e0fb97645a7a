// While plan reads the live state, a terminal shows pages read / total; logs and CI do not.
import { afterAll, beforeAll, expect, it } from 'vitest';
import { allOutput, RAW_KEY_PATTERN, runCli } from '../support/cli.js';
import { cliCommand, runInTty, setup, type Setup } from './helpers.js';
import { patient } from '../support/patience.js';

// 250 clients: three pages of clients, so the total is more than the list count.
const config = `apiVersion: kms-sync/v1
projects:
  - slug: many
    name: Many
    environments:
      - type: staging
        url: https://s.example
        templates: [{ name: std, rateLimitDay: 10, maxClients: 1000 }]
        clients:
${Array.from({ length: 250 }, (_, i) => `          - { name: c${i}, template: std }`).join('\n')}
`;

let s: Setup;
beforeAll(async () => {
  s = await setup({ 'kms-sync.yaml': config });
  const applied = await runCli(['apply', '--yes', '--parallelism', '16'], { cwd: s.dir, env: s.env });
  expect(applied.code, applied.stderr).toBe(0);
}, patient(120_000));
afterAll(async () => {
  await s?.emu.close();
  for (const text of allOutput) expect(text).not.toMatch(RAW_KEY_PATTERN);
});

it('plan on a terminal shows the pages read out of the total, and clears the line before the plan', async () => {
  // plan reads ahead while the configuration loads, before the line is drawn: the project list,
  // answered at once, is read by then, and counts too. The client pages and the endpoints wait, so
  // the line is drawn, and redrawn between pages, however late it starts.
  s.emu.addFault({ method: 'GET', route: '/client', mode: 'delay', delayMs: patient(1_500), times: 3 });
  s.emu.addFault({ method: 'GET', route: '/endpoint', mode: 'delay', delayMs: patient(1_500), times: 1 });
  const r = await runInTty(`${cliCommand(['plan'])} | cat`, { cwd: s.dir, env: s.env });
  expect(r.code, r.output).toBe(0);
  const drawn = [...r.output.matchAll(/Reading live state… (\d+)\/(\d+) pages/g)].map(
    (m) => [Number(m[1]), Number(m[2])] as const,
  );
  expect(drawn.length, r.output).toBeGreaterThan(1);
  // Never more pages read than known, and the counts only grow.
  for (const [read, total] of drawn) expect(read).toBeLessThanOrEqual(total);
  for (let i = 1; i < drawn.length; i++) expect(drawn[i]![0]).toBeGreaterThanOrEqual(drawn[i - 1]![0]);
  // The project list, three pages of clients and the endpoints: each list's first page draws the
  // grown total, so the last total drawn counts five pages or more, whatever the timing (a list read
  // ahead, before the line was drawn, included).
  expect(drawn.at(-1)![1], r.output).toBeGreaterThanOrEqual(5);
  expect(r.output).toContain('No changes.');
});

it('without a terminal (a log, a pipe) and in CI, no progress line is written', async () => {
  const piped = await runCli(['plan'], { cwd: s.dir, env: s.env });
  expect(piped.code, piped.stderr).toBe(0);
  expect(piped.stderr + piped.stdout).not.toContain('Reading live state');
  const ci = await runInTty(`${cliCommand(['plan'])} | cat`, { cwd: s.dir, env: { ...s.env, CI: 'true' } });
  expect(ci.code, ci.output).toBe(0);
  expect(ci.output).not.toContain('Reading live state');
});
