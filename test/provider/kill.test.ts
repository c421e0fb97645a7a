// Issue 24, with the real terraform binary against the emulator over HTTP: Terraform (or the
// provider process) SIGKILLed in the middle of an apply of many kms_key, then applied again until
// it succeeds, must leave exactly one live key per resource, each with its raw value in the store
// (decrypted with sops-age, validated by the service); the provider must not outlive a killed
// Terraform; -replace revokes the replaced key and destroy -target every generation; a store that
// breaks mid-apply stops the issuing. Skipped, loudly, without terraform on PATH.
import { spawn } from 'node:child_process';
import {
  existsSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  readlinkSync,
  renameSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startEmulator, type RunningEmulator } from '../../src/emulator/index.js';
import { RAW_KEY_PATTERN, workspace } from '../support/cli.js';
import { PROVIDER_BIN } from './harness.js';
import {
  decryptStore,
  expectOk,
  offlineTerraform,
  PROVIDER_VERSION as VERSION,
  NO_TERRAFORM,
  terraformOrSkip,
  type OfflineTerraform,
} from './terraform-support.js';
import { HCL_REQUIRED_PROVIDER, hclProjectEnvironment } from '../support/terraform-offline.js';
import { skipWhen } from '../support/skip.js';
import { patient, waitFor } from '../support/patience.js';

const TERRAFORM = terraformOrSkip();
const API_KEY = 'sk_test_killapply0123456789';

let emu: RunningEmulator;
let root: string;
let terraform: OfflineTerraform;
/** Everything terraform printed, for "no raw key was ever printed". */
const printed: string[] = [];

const tf = (cwd: string, ...args: string[]) => terraform.run(cwd, args);

const header = `${HCL_REQUIRED_PROVIDER}
provider "kms" {}
`;

/** A project, an environment, a template, `clients` clients with `keys` keys each. */
function manyKeys(slug: string, clients: number, keys: number, keyExtra = ''): string {
  return `${header}
${hclProjectEnvironment({ slug: slug, name: slug, type: 'production', url: `https://api.${slug}.example` })}
resource "kms_template" "t" {
  project_env    = kms_environment.e.project_env
  name           = "std"
  rate_limit_day = 1000
  max_clients    = 100
}
resource "kms_client" "c" {
  count       = ${clients}
  project_env = kms_environment.e.project_env
  name        = "c\${count.index}"
  template    = kms_template.t.name
}
locals {
  keys = { for pair in setproduct(range(${clients}), range(${keys})) : "c\${pair[0]}-k\${pair[1]}" => { client = pair[0], key = pair[1] } }
}
resource "kms_key" "k" {
  for_each    = local.keys
  project_env = kms_client.c[each.value.client].project_env
  client      = kms_client.c[each.value.client].name
  name        = "k\${each.value.key}"
  ttl         = "90d"
${keyExtra}}
`;
}

/** A working directory `name` with this main.tf, `terraform init`ed. */
const project = (name: string, mainTf: string): Promise<string> => terraform.init(name, { 'main.tf': mainTf });

interface LiveKey {
  id: string;
  name: string;
  keyPrefix: string;
}
interface LiveClient {
  id?: string;
  client_uuid?: string;
  name: string;
  keys: LiveKey[];
}
function liveClients(slug: string): LiveClient[] {
  const p = (emu.service.toJSON().projects as any[]).find((x) => x.slug === slug);
  return (p?.envs?.[0]?.clients ?? []) as LiveClient[];
}
const liveKeyCount = (slug: string) => liveClients(slug).reduce((n, c) => n + c.keys.length, 0);

/** Does the service accept `raw` as the key `name` of the client? (the validation operation) */
async function validates(projectEnv: string, clientUuid: string, name: string, raw: string): Promise<boolean> {
  const res = await fetch(
    `${emu.url}/client/${clientUuid}?project_env=${projectEnv}&method_path=${encodeURIComponent('GET:/v1/orders')}`,
    {
      method: 'POST',
      headers: { 'x-api-key': API_KEY, 'content-type': 'application/json' },
      body: JSON.stringify({ name, headers: { 'x-api-key': raw } }),
    },
  );
  return ((await res.json()) as { success?: boolean }).success === true;
}

/**
 * Exactly one live key per (client, key name), each the one the store holds, and every stored
 * raw value validates at the service.
 */
async function expectOneHeldKeyEach(dir: string, slug: string, clients: number, keys: number) {
  const projectEnv = `${slug}-production`;
  const stored = await decryptStore(path.join(dir, '.kms-sync', 'secrets.sops.yaml'), terraform.env.SOPS_AGE_KEY_FILE!);
  const live = liveClients(slug);
  expect(live.length).toBe(clients);
  expect(live.reduce((n, c) => n + c.keys.length, 0)).toBe(clients * keys);
  for (const c of live) {
    expect(c.keys.map((k) => k.name).sort()).toEqual(Array.from({ length: keys }, (_, i) => `k${i}`).sort());
    for (const k of c.keys) {
      const raw = stored[`${projectEnv}/${c.name}/${k.name}`];
      expect(raw, `${c.name}/${k.name} has no raw value in the store`).toMatch(RAW_KEY_PATTERN);
      expect(raw!.startsWith(k.keyPrefix), `${c.name}/${k.name}: the store holds another key than the live one`).toBe(
        true,
      );
      expect(await validates(projectEnv, (c.id ?? c.client_uuid)!, k.name, raw!)).toBe(true);
    }
  }
}

/** Pids of the provider processes started for `dir` (node running the provider, in that folder). */
function providerPids(dir: string): number[] {
  const out: number[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const cmd = readFileSync(`/proc/${entry}/cmdline`, 'utf8');
      if (cmd.includes(PROVIDER_BIN) && readlinkSync(`/proc/${entry}/cwd`) === dir) out.push(Number(entry));
    } catch {
      // gone meanwhile
    }
  }
  return out;
}
/** Whether `pid` runs (not a zombie); a process that exits between the checks is not alive. */
const alive = (pid: number) => {
  try {
    return !/\) Z /.test(readFileSync(`/proc/${pid}/stat`, 'utf8'));
  } catch {
    return false;
  }
};

/**
 * Starts `terraform apply` in `dir` with the provider pausing `pauseMs` after each store write (so
 * that keys sit issued and stored but unreported to Terraform), waits until `liveAtLeast` keys are live,
 * then SIGKILLs `victim`. Resolves once terraform has exited.
 */
async function applyAndKill(
  dir: string,
  slug: string,
  liveAtLeast: number,
  victim: 'terraform' | 'provider',
  pauseMs: number,
  args: string[] = [],
) {
  const child = spawn(TERRAFORM!, ['apply', '-input=false', '-no-color', '-auto-approve', '-parallelism=10', ...args], {
    cwd: dir,
    env: {
      ...terraform.env,
      KMS_SYNC_TEST_PAUSE: `after-store:${pauseMs}`,
      KMS_SYNC_TEST_TRACE: path.join(dir, 'trace.txt'),
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  child.stdout.on('data', (b: Buffer) => {
    output += b.toString();
  });
  child.stderr.on('data', (b: Buffer) => {
    output += b.toString();
  });
  const exited = new Promise<void>((resolve) => child.on('exit', () => resolve()));
  await waitFor(() => liveKeyCount(slug) >= liveAtLeast, 40_000);
  expect(liveKeyCount(slug), `no keys issued before the kill:\n${output}`).toBeGreaterThanOrEqual(liveAtLeast);
  const providers = providerPids(dir);
  expect(providers.length).toBeGreaterThan(0);
  if (victim === 'terraform') child.kill('SIGKILL');
  else for (const pid of providers) process.kill(pid, 'SIGKILL');
  await exited;
  printed.push(output);
  const trace = readFileSync(path.join(dir, 'trace.txt'), 'utf8')
    .split('\n')
    .map((l) => l.split(' ')[0]);
  const at = (p: string) => trace.filter((x) => x === p).length;
  console.log(
    `${slug}: pipeline points reached by the killed apply: issue-sent ${at('issue-sent')}, after-journal ${at('after-journal')}, after-store ${at('after-store')}, cleared ${at('cleared')}`,
  );
  return { providers, output };
}

/** Ids of the live keys whose raw value the store holds now. */
async function heldKeyIds(dir: string, slug: string): Promise<string[]> {
  const file = path.join(dir, '.kms-sync', 'secrets.sops.yaml');
  if (!existsSync(file)) return [];
  const stored = await decryptStore(file, terraform.env.SOPS_AGE_KEY_FILE!);
  return liveClients(slug).flatMap((c) =>
    c.keys.filter((k) => stored[`${slug}-production/${c.name}/${k.name}`]?.startsWith(k.keyPrefix)).map((k) => k.id),
  );
}

/**
 * After a kill: the keys the killed apply issued and stored, whose state Terraform never saved,
 * are adopted by the re-apply (still live, nothing issued for them), and no key is left over.
 */
async function expectAdoptedAfterReapply(dir: string, slug: string) {
  const liveIds = liveClients(slug).flatMap((c) => c.keys.map((k) => k.id));
  const live = liveIds.length;
  const held = await heldKeyIds(dir, slug);
  const state = existsSync(path.join(dir, 'terraform.tfstate'))
    ? readFileSync(path.join(dir, 'terraform.tfstate'), 'utf8')
    : '';
  const untracked = held.filter((id) => !state.includes(id));
  const attempts = await applyUntilDone(dir);
  const still = new Set(liveClients(slug).flatMap((c) => c.keys.map((k) => k.id)));
  console.log(
    `${slug}: ${live} live keys at the kill, ${held.length} of them stored, ${untracked.length} not in the Terraform state; ` +
      `re-applied in ${attempts} run(s); ${untracked.filter((id) => still.has(id)).length} of those adopted; ` +
      `${liveIds.filter((id) => still.has(id)).length} of the ${live} still live after (the rest had no raw value anywhere and were revoked)`,
  );
  expect(
    untracked.filter((id) => !still.has(id)),
    'stored keys unknown to Terraform were replaced instead of adopted',
  ).toEqual([]);
}

/** Applies until an apply succeeds, as a user would (no -lock=false: a SIGKILLed Terraform leaves no lock that blocks the next). */
async function applyUntilDone(dir: string): Promise<number> {
  for (let i = 1; i <= 3; i++) {
    const r = await tf(dir, 'apply', '-input=false', '-no-color', '-auto-approve');
    if (r.code === 0) return i;
    if (i === 3) expectOk(r, 'apply after the kill');
  }
  return 3;
}

describe.skipIf(skipWhen(!TERRAFORM, `test/provider/kill.test.ts: ${NO_TERRAFORM}`))(
  'terraform killed mid-apply, and other ends of an apply (issue 24)',
  () => {
    beforeAll(async () => {
      emu = await startEmulator({ port: 0, apiKeys: [API_KEY], latencyMs: 5 });
      root = workspace();
      terraform = offlineTerraform(TERRAFORM!, root, { url: emu.url, apiKey: API_KEY });
    }, patient(60_000));

    afterAll(async () => {
      await emu?.close();
      for (const o of [...(terraform?.outputs ?? []), ...printed]) expect(o).not.toMatch(RAW_KEY_PATTERN);
      if (root) rmSync(root, { recursive: true, force: true });
    });

    it(
      'SIGKILL of terraform: the provider exits within seconds, and the re-apply leaves one held key per resource',
      async () => {
        const dir = await project('kill-tf', manyKeys('killtf', 10, 5));
        const { providers } = await applyAndKill(dir, 'killtf', 15, 'terraform', 1_500);
        // The provider notices its Terraform is gone, lets the keys in flight reach the store, exits.
        const killed = Date.now();
        await waitFor(() => !providers.some(alive), 15_000);
        expect(providers.filter(alive), 'provider processes still running after Terraform was killed').toEqual([]);
        console.log(`killtf: the provider exited ${Date.now() - killed} ms after Terraform was killed`);
        // It exited gracefully: every key it journaled reached its store and left the journal.
        const points = readFileSync(path.join(dir, 'trace.txt'), 'utf8')
          .split('\n')
          .map((l) => l.split(' ')[0]);
        const count = (p: string) => points.filter((x) => x === p).length;
        expect(count('after-journal')).toBeGreaterThan(0);
        expect(count('cleared'), 'keys journaled but never stored: the provider died mid-way').toBe(
          count('after-journal'),
        );
        await expectAdoptedAfterReapply(dir, 'killtf');
        await expectOneHeldKeyEach(dir, 'killtf', 10, 5);
        // The next plan confirms the keys the last apply issued: nothing is left to adopt or change.
        const plan = await tf(dir, 'plan', '-input=false', '-no-color', '-detailed-exitcode');
        expect(plan.code, plan.stdout + plan.stderr).toBe(0);
      },
      patient(90_000),
    );

    it(
      'SIGKILL of terraform with the provider behind a shell wrapper that does not exec: the provider still exits',
      async () => {
        const saved = terraform;
        terraform = offlineTerraform(TERRAFORM!, path.join(root, 'noexec'), { url: emu.url, apiKey: API_KEY });
        const mirror = path.join(
          root,
          'noexec',
          'mirror',
          'registry.terraform.io',
          'kms-sync',
          'kms',
          VERSION,
          'linux_amd64',
          `terraform-provider-kms_v${VERSION}`,
        );
        writeFileSync(mirror, `#!/bin/sh\n"${process.execPath}" "${PROVIDER_BIN}" "$@"\n`);
        try {
          const dir = await project(path.join('noexec', 'work'), manyKeys('noexec', 4, 5));
          const { providers } = await applyAndKill(dir, 'noexec', 8, 'terraform', 1_000);
          const killed = Date.now();
          await waitFor(() => !providers.some(alive), 15_000);
          expect(providers.filter(alive), 'provider processes still running after Terraform was killed').toEqual([]);
          console.log(`noexec: the provider exited ${Date.now() - killed} ms after Terraform was killed`);
          await applyUntilDone(dir);
          await expectOneHeldKeyEach(dir, 'noexec', 4, 5);
        } finally {
          printed.push(...terraform.outputs);
          terraform = saved;
        }
      },
      patient(90_000),
    );

    it(
      'SIGKILL of the provider process: the re-apply leaves one held key per resource',
      async () => {
        const dir = await project('kill-provider', manyKeys('killprov', 10, 5));
        await applyAndKill(dir, 'killprov', 15, 'provider', 250);
        await expectAdoptedAfterReapply(dir, 'killprov');
        await expectOneHeldKeyEach(dir, 'killprov', 10, 5);
      },
      patient(90_000),
    );

    it(
      'SIGKILL of terraform during -replace of create_before_destroy keys: the re-apply without -replace leaves one held key per resource',
      async () => {
        const dir = await project(
          'kill-replace',
          manyKeys('killrep', 4, 5, '  lifecycle {\n    create_before_destroy = true\n  }\n'),
        );
        expectOk(await tf(dir, 'apply', '-input=false', '-no-color', '-auto-approve'), 'apply');
        const all = Array.from({ length: 4 }, (_, c) =>
          Array.from({ length: 5 }, (_, k) => `-replace=kms_key.k["c${c}-k${k}"]`),
        ).flat();
        await applyAndKill(dir, 'killrep', 20 + 8, 'terraform', 1_000, all);
        await waitFor(() => providerPids(dir).length === 0, 15_000); // the provider finishes what it had in flight, then exits
        console.log(`killrep: ${liveKeyCount('killrep')} live keys for 20 resources after the kill`);
        await applyUntilDone(dir);
        await expectOneHeldKeyEach(dir, 'killrep', 4, 5);
      },
      patient(90_000),
    );

    it(
      '-replace revokes the replaced key once its successor is stored; destroy -target revokes every generation',
      async () => {
        const dir = await project(
          'replace',
          `${manyKeys('repl', 1, 0)}
resource "kms_key" "one" {
  project_env = kms_client.c[0].project_env
  client      = kms_client.c[0].name
  name        = "one"
  ttl         = "90d"
  lifecycle {
    create_before_destroy = true
  }
}
resource "kms_key" "two" {
  project_env      = kms_client.c[0].project_env
  client           = kms_client.c[0].name
  name             = "two"
  rotation_overlap = "1h"
  lifecycle {
    create_before_destroy = true
  }
}
`,
        );
        expectOk(await tf(dir, 'apply', '-input=false', '-no-color', '-auto-approve'), 'apply');
        const storeFile = path.join(dir, '.kms-sync', 'secrets.sops.yaml');
        const client = liveClients('repl')[0]!;
        const uuid = (client.id ?? client.client_uuid)!;
        const before = await decryptStore(storeFile, terraform.env.SOPS_AGE_KEY_FILE!);
        const oldOne = before['repl-production/c0/one']!;
        const oldTwo = before['repl-production/c0/two']!;
        expect(await validates('repl-production', uuid, 'one', oldOne)).toBe(true);

        expectOk(
          await tf(
            dir,
            'apply',
            '-input=false',
            '-no-color',
            '-auto-approve',
            '-replace=kms_key.one',
            '-replace=kms_key.two',
          ),
          'apply -replace',
        );
        const after = await decryptStore(storeFile, terraform.env.SOPS_AGE_KEY_FILE!);
        // Without rotation_overlap the old key is revoked at once; the new one is stored and valid.
        expect(after['repl-production/c0/one']).not.toBe(oldOne);
        expect(await validates('repl-production', uuid, 'one', oldOne)).toBe(false);
        expect(await validates('repl-production', uuid, 'one', after['repl-production/c0/one']!)).toBe(true);
        expect(liveClients('repl')[0]!.keys.filter((k) => k.name === 'one')).toHaveLength(1);
        // With rotation_overlap both generations are valid for the overlap.
        expect(await validates('repl-production', uuid, 'two', oldTwo)).toBe(true);
        expect(await validates('repl-production', uuid, 'two', after['repl-production/c0/two']!)).toBe(true);
        expect(liveClients('repl')[0]!.keys.filter((k) => k.name === 'two')).toHaveLength(2);

        expectOk(
          await tf(dir, 'destroy', '-input=false', '-no-color', '-auto-approve', '-target=kms_key.two'),
          'destroy -target',
        );
        expect(liveClients('repl')[0]!.keys.filter((k) => k.name === 'two')).toEqual([]);
        expect(await validates('repl-production', uuid, 'two', oldTwo)).toBe(false);
      },
      patient(90_000),
    );

    it(
      'stops issuing at the first failed store write',
      async () => {
        const dir = await project('store-breaks', manyKeys('brk', 4, 5));
        const storeFile = path.join(dir, '.kms-sync', 'secrets.sops.yaml');
        // Everything but the keys first, and one key so that the store file exists.
        expectOk(
          await tf(dir, 'apply', '-input=false', '-no-color', '-auto-approve', '-target=kms_key.k["c0-k0"]'),
          'apply one key',
        );
        const child = spawn(TERRAFORM!, ['apply', '-input=false', '-no-color', '-auto-approve', '-parallelism=2'], {
          cwd: dir,
          env: { ...terraform.env, KMS_SYNC_TEST_PAUSE: 'after-store:150' },
          stdio: ['ignore', 'pipe', 'pipe'],
        });
        let output = '';
        child.stdout.on('data', (b: Buffer) => {
          output += b.toString();
        });
        child.stderr.on('data', (b: Buffer) => {
          output += b.toString();
        });
        const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
        // Its output is whole once the pipes close ('exit' can come before the last of it is read),
        // bounded in case a process it started held them open.
        const closed = new Promise<void>((resolve) => child.on('close', () => resolve()));
        await waitFor(() => liveKeyCount('brk') >= 4, 40_000);
        // The store becomes unwritable: the file's place is taken by a folder.
        renameSync(storeFile, `${storeFile}.aside`);
        mkdirSync(storeFile);
        const brokeAt = liveKeyCount('brk');
        const code = await exited;
        await Promise.race([closed, new Promise((r) => setTimeout(r, patient(10_000)))]);
        printed.push(output);
        const issued = liveKeyCount('brk');
        rmSync(storeFile, { recursive: true, force: true });
        renameSync(`${storeFile}.aside`, storeFile);
        console.log(`brk: ${brokeAt} keys live when the store broke, ${issued} when the apply ended (of 20)`);
        expect(code).not.toBe(0);
        expect(output).toMatch(/No key issued: the secret store failed earlier in this apply/);
        // Only the requests already in flight when the store broke (parallelism 2) issued keys.
        expect(issued - brokeAt, output).toBeLessThanOrEqual(2);
        expect(issued).toBeLessThan(20);
        // The next apply flushes the journal, then converges.
        await applyUntilDone(dir);
        await expectOneHeldKeyEach(dir, 'brk', 4, 5);
      },
      patient(90_000),
    );
  },
);
