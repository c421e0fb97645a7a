// A project rename goes through one of that project's own live environments (the service addresses
// a project by an environment slug). Slugs may share a prefix (`acme` and `acme-eu`), and an
// environment the same run creates does not exist yet when the rename is sent.
import { rmSync } from 'node:fs';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { runCli, writeFiles } from '../support/cli.js';
import { setup, type Setup } from '../cli/helpers.js';
import { patient } from '../support/patience.js';

const config = (acmeName: string, acmeEnvs: string[]) => `apiVersion: kms-sync/v1
projects:
  - slug: acme-eu
    name: Acme EU
    environments:
      - { type: prod, url: https://eu.example }
  - slug: acme
    name: ${acmeName}
    environments:
${acmeEnvs.map((t) => `      - { type: ${t}, url: https://${t}.example }`).join('\n')}
`;

let s: Setup;
beforeAll(async () => {
  s = await setup({ 'kms-sync.yaml': config('Acme', ['prod']) });
  const first = await runCli(['apply', '--auto-approve'], { cwd: s.dir, env: s.env });
  expect(first.code, first.stderr).toBe(0);
}, patient(60_000));
afterAll(async () => {
  await s?.emu.close();
  if (s) rmSync(s.dir, { recursive: true, force: true });
});

const names = () =>
  Object.fromEntries(
    (s.emu.service.toJSON() as { projects: { slug: string; name: string }[] }).projects.map((p) => [p.slug, p.name]),
  );

it(
  'renames the project itself, never the one whose slug it starts, and never through an environment created later in the run',
  async () => {
    // `acme-eu-prod` starts with `acme-`, and `acme-alpha` sorts before `acme-prod` but does not exist yet.
    writeFiles(s.dir, { 'kms-sync.yaml': config('Acme Corp', ['alpha', 'prod']) });
    const applied = await runCli(['apply', '--auto-approve'], { cwd: s.dir, env: s.env });
    expect(applied.code, applied.stdout + applied.stderr).toBe(0);
    expect(names()).toEqual({ 'acme-eu': 'Acme EU', acme: 'Acme Corp' });
    const again = await runCli(['plan', '--detailed-exitcode'], { cwd: s.dir, env: s.env });
    expect(again.code, again.stdout).toBe(0);
  },
  patient(60_000),
);
