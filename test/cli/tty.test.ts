// What depends on a terminal, through a real pseudo-terminal: the confirmation is asked whenever
// stdin is a terminal, also when stdout is piped (`apply | tee log`).
import { readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { allOutput, RAW_KEY_PATTERN, runCli } from '../support/cli.js';
import { cliCommand, runInTty, setup, smallConfig, type Setup } from './helpers.js';

let s: Setup;
beforeAll(async () => {
  s = await setup();
});
afterAll(async () => {
  await s?.emu.close();
  for (const text of allOutput) expect(text).not.toMatch(RAW_KEY_PATTERN);
});

it('apply | tee log asks on the terminal, applies after "yes", and the log holds the plan and the result', async () => {
  const r = await runInTty(`${cliCommand(['apply', '-f', 'kms-sync.yaml'])} | tee apply.log`, {
    cwd: s.dir,
    env: s.env,
    answer: 'yes',
  });
  expect(r.code, r.output).toBe(0);
  expect(r.output).toContain('Do you want to perform these actions?');
  // On a terminal, the progress line shows the elapsed time (and an estimate while work is left).
  expect(r.output).toMatch(/Applying… \d+\/\d+ done, \d+s elapsed/);
  // Above it, a line per finished resource, which stays once the progress line is gone.
  expect(r.output).toMatch(/client\.shop-staging\/web: create complete/);
  const log = readFileSync(path.join(s.dir, 'apply.log'), 'utf8');
  expect(log).toContain('client.shop-staging/web');
  expect(log).toContain('Apply complete!');
  // The question went to the terminal (stderr), not into the log.
  expect(log).not.toContain('Do you want to perform these actions?');
});

it('apply | cat answered "no" cancels (exit 1) and changes nothing', async () => {
  writeFileSync(
    path.join(s.dir, 'kms-sync.yaml'),
    smallConfig.replace('keys: [{ name: main }] }]', 'keys: [{ name: main }] }, { name: extra, template: std }]'),
  );
  const r = await runInTty(`${cliCommand(['apply', '-f', 'kms-sync.yaml'])} | cat`, {
    cwd: s.dir,
    env: s.env,
    answer: 'no',
  });
  expect(r.code, r.output).toBe(1);
  expect(r.output).toContain('client.shop-staging/extra');
  expect(r.output).toContain('Apply cancelled.');
  const after = await runCli(['plan', '-f', 'kms-sync.yaml', '--detailed-exitcode'], { cwd: s.dir, env: s.env });
  expect(after.code, after.stderr).toBe(2);
});
