// The CDKTF front end against the emulator over HTTP, through the CLI as a user runs it: the
// example stack and the YAML example plan the same, apply from one and the other plans nothing
// (both ways, and with the cdktn flavour), drift, and export --format cdktf/cdktn that re-plans
// to no changes. Raw keys land in the store and nowhere in the synth output or any CLI output.
import { readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startEmulator, type RunningEmulator } from '../../src/emulator/index.js';
import { SopsFileStore } from '../../src/secrets/sops/file-store.js';
import { allOutput, RAW_KEY_PATTERN, repoRoot, runCli } from '../support/cli.js';
import { cdktfProject, type Flavour } from './helpers.js';
import { patient } from '../support/patience.js';

const API_KEY = 'sk_test_cdktfengine0123456';
const YAML_FILES = ['-f', 'project.yaml', '-f', 'teams/payments.yaml', '-f', 'teams/partners.yaml'];

const emulators: RunningEmulator[] = [];
afterAll(async () => {
  await Promise.all(emulators.map((e) => e.close()));
  for (const text of allOutput) expect(text).not.toMatch(RAW_KEY_PATTERN);
});

/** A folder holding both examples (stack and YAML) side by side, so they share one default store. */
function bothExamples(flavour: Flavour = 'cdktf'): string {
  const files: Record<string, string> = {};
  const copy = (from: string, to: string) => {
    let text = readFileSync(path.join(repoRoot, from), 'utf8');
    if (flavour === 'cdktn')
      text = text.replace(/from 'cdktf'/g, "from 'cdktn'").replace(/kms-sync\/cdktf/g, 'kms-sync/cdktn');
    files[to] = text;
  };
  for (const f of ['main.ts', 'cdktf.json', 'teams/payments.ts', 'teams/partners.ts']) copy(`examples/cdktf/${f}`, f);
  for (const f of ['project.yaml', 'teams/payments.yaml', 'teams/partners.yaml']) copy(`examples/acme/${f}`, f);
  return cdktfProject(files);
}

async function service(dir: string): Promise<NodeJS.ProcessEnv> {
  const emu = await startEmulator({ port: 0, apiKeys: [API_KEY] });
  emulators.push(emu);
  return {
    KMS_API_URL: emu.url,
    KMS_API_KEY: API_KEY,
    SOPS_AGE_KEY_FILE: path.join(dir, 'age.txt'),
    KMS_SYNC_ALLOW_LOCAL_STORE: '1',
  };
}

/** The plan JSON without its timestamp (metadata key order differs: cdktf sorts keys; toEqual ignores it). */
const planOf = (stdout: string) => {
  const p = JSON.parse(stdout) as Record<string, unknown>;
  delete p.generated_at;
  return p;
};

function filesUnder(dir: string): string[] {
  return readdirSync(dir, { recursive: true, encoding: 'utf8' })
    .map((f) => path.join(dir, f))
    .filter((f) => statSync(f).isFile());
}

describe('CDKTF front end against the emulator', () => {
  let dir: string;
  let env: NodeJS.ProcessEnv;
  let liveOwner: string | undefined;
  beforeAll(async () => {
    dir = bothExamples();
    env = await service(dir);
  });

  it(
    'plans the example stack exactly as the YAML example',
    async () => {
      const yaml = await runCli(['plan', '--json', ...YAML_FILES], { env, cwd: dir });
      const cdktf = await runCli(['plan', '--json', '--cdktf'], { env, cwd: dir });
      expect(yaml.code, yaml.stderr).toBe(0);
      expect(cdktf.code, cdktf.stderr).toBe(0);
      const a = planOf(yaml.stdout);
      expect((a.resource_changes as unknown[]).length).toBe(1 + 2 + 6 + 10 + 8); // keys are created with their clients
      expect(planOf(cdktf.stdout)).toEqual(a);
    },
    patient(60_000),
  );

  it(
    'applies from CDKTF; then YAML and CDKTF plan no changes; raw keys only in the store',
    async () => {
      const apply = await runCli(['apply', '--cdktf', '.', '--auto-approve'], { env, cwd: dir });
      expect(apply.code, apply.stdout + apply.stderr).toBe(0);
      expect(apply.stdout).toContain('Keys issued and stored (12)');
      // secrets list --cdktf DIR reads the app's stores (its folder's), from anywhere.
      const listed = await runCli(['secrets', 'list', '--json', '--cdktf', dir], { env, cwd: repoRoot });
      expect(listed.code, listed.stderr).toBe(0);
      const inStore = JSON.parse(listed.stdout) as { store: string; secrets: { name: string }[] };
      expect(inStore.store).toContain(dir);
      expect(inStore.secrets).toHaveLength(12);
      const yaml = await runCli(['plan', '--detailed-exitcode', ...YAML_FILES], { env, cwd: dir });
      expect(yaml.code, yaml.stdout).toBe(0);
      expect(yaml.stdout).toContain('No changes.');

      // A synth output kept on disk (cdktf synth, or CI) is read with --cdktf-out; it holds no raw key.
      const { execFileSync } = await import('node:child_process');
      execFileSync(process.execPath, ['main.ts'], {
        cwd: dir,
        env: { ...process.env, CDKTF_OUTDIR: path.join(dir, 'cdktf.out') },
      });
      const again = await runCli(['plan', '--detailed-exitcode', '--cdktf-out', 'cdktf.out', '--stack', 'acme'], {
        env,
        cwd: dir,
      });
      expect(again.code, again.stdout + again.stderr).toBe(0);

      const store = new SopsFileStore(path.join(dir, '.kms-sync', 'secrets.sops.yaml'), { env });
      const secrets = await store.readAll();
      expect(secrets.size).toBe(12);
      expect(secrets.get('acme/partners/wayne-enterprises')).toMatch(RAW_KEY_PATTERN);
      for (const f of filesUnder(path.join(dir, 'cdktf.out')))
        expect(readFileSync(f, 'utf8'), f).not.toMatch(RAW_KEY_PATTERN);
      for (const raw of secrets.values()) {
        for (const f of filesUnder(path.join(dir, 'cdktf.out'))) expect(readFileSync(f, 'utf8')).not.toContain(raw);
      }
    },
    patient(90_000),
  );

  it(
    'drift from CDKTF: none after apply, then a change made behind its back',
    async () => {
      const clean = await runCli(['drift', '--cdktf', '.', '--no-usage'], { env, cwd: dir });
      expect(clean.code, clean.stdout + clean.stderr).toBe(0);
      const list = await fetch(`${env.KMS_API_URL}/client?project_env=acme-production&name=initech`, {
        headers: { 'x-api-key': API_KEY },
      });
      const initech = ((await list.json()) as { data: Array<{ id: string; metadata: Record<string, unknown> }> })
        .data[0]!;
      const put = await fetch(`${env.KMS_API_URL}/client/${initech.id}?project_env=acme-production`, {
        method: 'PUT',
        headers: { 'x-api-key': API_KEY, 'content-type': 'application/json' },
        body: JSON.stringify({ ipWhitelist: ['203.0.113.0/24', '198.51.100.0/24'] }),
      });
      expect(put.status).toBe(200);
      const drift = await runCli(['drift', '--cdktf', '.', '--no-usage'], { env, cwd: dir });
      expect(drift.code).toBe(2);
      expect(drift.stdout).toContain('client.acme-production/initech');
      expect(drift.stdout).toContain('198.51.100.0/24');
    },
    patient(90_000),
  );

  it.each(['cdktf', 'cdktn'] as const)(
    'export --format %s writes a stack that synthesizes and plans no changes',
    async (flavour) => {
      const out = path.join(dir, `exported-${flavour}`);
      const r = await runCli(['export', '--format', flavour, '--env', 'acme-production', '-o', out], { env, cwd: dir });
      expect(r.code, r.stderr).toBe(0);
      expect(r.stderr).toContain('Wrote main.ts, cdktf.json, package.json');
      const main = readFileSync(path.join(out, 'main.ts'), 'utf8');
      expect(main).toContain(`from 'kms-sync/${flavour}'`);
      expect(main).toContain('acmeProduction.addClient("globex"');
      expect(main).not.toMatch(RAW_KEY_PATTERN);
      // The exported project resolves its packages from the folder around it (here: the test project's
      // node_modules). Its folder has its own, empty default store, as with the YAML export: the
      // secret check would (rightly) want the keys issued before re-issued there.
      const plan = await runCli(['plan', '--detailed-exitcode', '--no-secret-check', '--cdktf', out], {
        env,
        cwd: dir,
      });
      expect(plan.code, plan.stdout + plan.stderr).toBe(0);
      expect(plan.stdout).toContain('No changes.');
      // One of acme's two environments: the project is looked up (a data source), not defined, so
      // planned under the owner of what it names it changes nothing and acme-staging is not in scope.
      expect(main).toContain('new KmsExternalProject(stack, "acme", { slug: "acme" });');
      expect(main).not.toContain('new KmsProject(');
      // The owner the example stack plans under (the same for both flavours: asked once per file).
      liveOwner ??= (
        JSON.parse((await runCli(['plan', '--json', '--cdktf', '.'], { env, cwd: dir })).stdout) as {
          target: { owner: string };
        }
      ).target.owner;
      writeFileSync(
        path.join(out, 'main.ts'),
        main.replace(
          /new KmsProvider\(stack, 'kms', \{ owner: "[^"]*" \}\)/,
          `new KmsProvider(stack, 'kms', { owner: ${JSON.stringify(liveOwner)} })`,
        ),
      );
      const owned = await runCli(['plan', '--json', '--detailed-exitcode', '--no-secret-check', '--cdktf', out], {
        env,
        cwd: dir,
      });
      expect(owned.code, owned.stdout + owned.stderr).toBe(0);
      const ownedPlan = JSON.parse(owned.stdout) as {
        target: { owner: string; environments: string[]; projects: string[] };
        resource_changes: unknown[];
        unmanaged: unknown[];
      };
      expect(ownedPlan.target).toMatchObject({ owner: liveOwner, environments: ['acme-production'], projects: [] });
      expect(ownedPlan.resource_changes).toEqual([]);
      expect(ownedPlan.unmanaged).toEqual([]);
      const again = await runCli(['export', '--format', flavour, '--env', 'acme-production', '-o', out], {
        env,
        cwd: dir,
      });
      expect(again.code).toBe(1);
      expect(again.stderr).toContain('refusing to overwrite');
    },
    patient(60_000),
  );
});

it(
  'demo --cdktf applies the example stack to an in-process emulator and ends with no changes',
  async () => {
    const w = cdktfProject();
    const r = await runCli(['demo', '--cdktf'], { cwd: w, env: { SOPS_AGE_KEY_FILE: path.join(w, 'age.txt') } });
    expect(r.code, r.stdout + r.stderr).toBe(0);
    expect(r.stdout).toContain('Keys issued and stored (12)');
    expect(r.stdout).toContain('No changes.');
  },
  patient(60_000),
);

// (CDKTF → YAML is above; the cdktn flavour applies here.)
describe.each([
  ['YAML', 'cdktf'],
  ['cdktn', 'YAML'],
] as const)('apply from %s, then %s plans no changes', (from, then) => {
  it(
    'converges',
    async () => {
      const flavour: Flavour = from === 'cdktn' ? 'cdktn' : 'cdktf';
      const dir = bothExamples(flavour);
      const env = await service(dir);
      const args = (which: string) => (which === 'YAML' ? YAML_FILES : ['--cdktf', '.']);
      const apply = await runCli(['apply', ...args(from), '--auto-approve'], { env, cwd: dir });
      expect(apply.code, apply.stdout + apply.stderr).toBe(0);
      const plan = await runCli(['plan', '--detailed-exitcode', ...args(then)], { env, cwd: dir });
      expect(plan.code, plan.stdout + plan.stderr).toBe(0);
      expect(plan.stdout).toContain('No changes.');
    },
    patient(90_000),
  );
});
