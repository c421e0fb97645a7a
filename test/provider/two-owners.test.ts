// One rule book for both engines, with the real terraform binary: two Terraform configurations
// (owners team-a and team-b) on one emulator. The second imports the first one's client and
// endpoint (reading is allowed) but can neither change, destroy nor issue keys on them: plan and
// destroy fail with a diagnostic naming the owner and take_ownership, and the objects stay as they
// were; with take_ownership = true it claims them, and then the first is refused in turn. And
// `kms-sync drift` of the same desired state as YAML reads the digest the provider wrote: an edit
// not yet applied is "pending", a change made through the API "changed outside". Skipped, loudly,
// without terraform.
import { mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startEmulator, type RunningEmulator } from '../../src/emulator/index.js';
import { APPLIED_KEY, OWNER_ID_KEY } from '../../src/model/index.js';
import { allOutput, RAW_KEY_PATTERN, runCli, workspace } from '../support/cli.js';
import {
  expectOk,
  offlineTerraform,
  NO_TERRAFORM,
  terraformOrSkip,
  type OfflineTerraform,
  type Run,
} from './terraform-support.js';
import { HCL_REQUIRED_PROVIDER, hclProjectEnvironment } from '../support/terraform-offline.js';
import { patient } from '../support/patience.js';

const TERRAFORM = terraformOrSkip();

const API_KEY = 'sk_test_twoowners0123456789';
let emu: RunningEmulator;
let root: string;
let terraform: OfflineTerraform;
let a: string;
let b: string;

const tf = (cwd: string, ...args: string[]) => terraform.run(cwd, [...args, '-input=false', '-no-color']);

const HEADER = `${HCL_REQUIRED_PROVIDER}
variable "meta" {
  type    = string
  default = "payments"
}
`;

/** Configuration A creates the whole environment. */
const CONFIG_A = `${HEADER}
provider "kms" {
  owner = "team-a"
}
${hclProjectEnvironment({ slug: 'acme', name: 'Acme', type: 'production', url: 'https://api.acme.example' })}
resource "kms_template" "t" {
  project_env    = kms_environment.e.project_env
  name           = "gold"
  rate_limit_day = 1000
  max_clients    = 10
}
resource "kms_client" "c" {
  project_env  = kms_environment.e.project_env
  name         = "globex"
  template     = kms_template.t.name
  ip_whitelist = ["10.0.0.0/8"]
  metadata     = { team = var.meta }
}
resource "kms_key" "k" {
  project_env = kms_client.c.project_env
  client      = kms_client.c.name
  name        = "primary"
}
resource "kms_endpoint" "o" {
  project_env = kms_environment.e.project_env
  method      = "GET"
  path        = "/v1/orders"
  name        = "List orders"
}
`;

/** Configuration B imports A's client and endpoint, and may ask for a key on that client. */
const CONFIG_B = `${HEADER}
variable "take" {
  type    = bool
  default = false
}
variable "extra_key" {
  type    = bool
  default = false
}
variable "dup" {
  type    = bool
  default = false
}
provider "kms" {
  owner          = "team-b"
  take_ownership = var.take
}
import {
  to = kms_client.c
  id = "acme-production/globex"
}
import {
  to = kms_endpoint.o
  id = "acme-production/GET:/v1/orders"
}
resource "kms_client" "c" {
  project_env  = "acme-production"
  name         = "globex"
  template     = "gold"
  ip_whitelist = ["10.0.0.0/8"]
  metadata     = { team = var.meta }
}
resource "kms_endpoint" "o" {
  project_env = "acme-production"
  method      = "GET"
  path        = "/v1/orders"
  name        = "List orders"
}
resource "kms_client" "dup" {
  count       = var.dup ? 1 : 0
  project_env = "acme-production"
  name        = "globex"
  template    = "gold"
}
resource "kms_key" "extra" {
  count       = var.extra_key ? 1 : 0
  project_env = kms_client.c.project_env
  client      = kms_client.c.name
  name        = "from-b"
}
`;
import { skipWhen } from '../support/skip.js';

/** A's desired state as YAML, with the same owner: what `kms-sync drift` compares against. */
const yamlOf = (team: string) => `apiVersion: kms-sync/v1
owner: team-a
projects:
  - slug: acme
    name: Acme
    environments:
      - type: production
        url: https://api.acme.example
        templates:
          - { name: gold, rateLimitDay: 1000, maxClients: 10 }
        clients:
          - name: globex
            template: gold
            ipWhitelist: [10.0.0.0/8]
            metadata: { team: ${team} }
            keys:
              - { name: primary }
        endpoints:
          - { method: GET, path: /v1/orders, name: List orders }
`;

interface DriftJson {
  items: { category: string; address: string }[];
}
/** `kms-sync drift` of A's folder (its store and journal), with the YAML of `team`. */
async function drift(team: string): Promise<{ code: number; report: DriftJson; stderr: string }> {
  writeFileSync(path.join(a, 'kms.yaml'), yamlOf(team));
  const r = await runCli(['drift', '-f', 'kms.yaml', '--format', 'json'], {
    cwd: a,
    env: { ...terraform.env, KMS_SYNC_ALLOW_LOCAL_STORE: '1' },
  });
  expect([0, 2], `drift:\n${r.stdout}\n${r.stderr}`).toContain(r.code);
  return { code: r.code, report: JSON.parse(r.stdout) as DriftJson, stderr: r.stderr };
}
const categoriesOf = (report: DriftJson, address: string) =>
  report.items.filter((i) => i.address === address).map((i) => i.category);

const liveEnv = () => (emu.service.toJSON().projects as any[]).find((p) => p.slug === 'acme')?.envs[0];
const liveClient = () => liveEnv()?.clients.find((c: any) => c.name === 'globex');
const liveEndpoint = () => liveEnv()?.endpoints.find((e: any) => e.path === '/v1/orders');
const api = (method: string, route: string, body?: unknown) =>
  fetch(`${emu.url}${route}`, {
    method,
    headers: { 'x-api-key': API_KEY, 'content-type': 'application/json' },
    ...(body ? { body: JSON.stringify(body) } : {}),
  });

const refused = (r: Run, owner: string) => {
  expect(r.code, r.stdout).not.toBe(0);
  const text = r.stderr.replace(/\s*│\s*/g, ' ').replace(/\s+/g, ' ');
  expect(text).toMatch(/Owned by another configuration/);
  expect(text).toContain(`owned by configuration '${owner}'`);
  expect(text).toMatch(/take_ownership = true/);
};

describe.skipIf(skipWhen(!TERRAFORM, `test/provider/two-owners.test.ts: ${NO_TERRAFORM}`))(
  'two Terraform configurations on one service: ownership, and drift after a provider apply',
  () => {
    beforeAll(async () => {
      emu = await startEmulator({ port: 0, apiKeys: [API_KEY] });
      root = workspace();
      terraform = offlineTerraform(TERRAFORM!, root, { url: emu.url, apiKey: API_KEY });
      a = path.join(root, 'a');
      b = path.join(root, 'b');
      for (const [dir, text] of [
        [a, CONFIG_A],
        [b, CONFIG_B],
      ] as const) {
        mkdirSync(dir);
        writeFileSync(path.join(dir, 'main.tf'), text);
        expectOk(await tf(dir, 'init'), `init ${dir}`);
      }
    }, patient(120_000));

    afterAll(async () => {
      await emu?.close();
      for (const o of [...(terraform?.outputs ?? []), ...allOutput]) expect(o).not.toMatch(RAW_KEY_PATTERN);
      if (root) rmSync(root, { recursive: true, force: true });
    });

    it(
      'A applies; the markers carry its owner and a digest Terraform never shows',
      async () => {
        expectOk(await tf(a, 'apply', '-auto-approve'), 'apply A');
        expect(liveClient().metadata).toMatchObject({
          team: 'payments',
          [OWNER_ID_KEY]: 'team-a',
          [APPLIED_KEY]: expect.stringMatching(/^[0-9a-f]{16}$/),
        });
        expect(liveEndpoint().metadata).toMatchObject({
          [OWNER_ID_KEY]: 'team-a',
          [APPLIED_KEY]: expect.stringMatching(/^[0-9a-f]{16}$/),
        });
        const again = await tf(a, 'plan', '-detailed-exitcode');
        expect(again.code, `${again.stdout}\n${again.stderr}`).toBe(0);
        expect(readFileSync(path.join(a, 'terraform.tfstate'), 'utf8')).not.toContain(APPLIED_KEY);
      },
      patient(120_000),
    );

    it(
      'drift of the same desired state: nothing; an edit not applied yet is pending; a change through the API is changed outside',
      async () => {
        const same = await drift('payments');
        expect(same.code, JSON.stringify(same.report.items)).toBe(0);

        const edited = await drift('billing');
        expect(edited.code).toBe(2);
        expect(categoriesOf(edited.report, 'client.acme-production/globex')).toEqual(['pending']);

        const uuid = liveClient().id;
        expect(
          (await api('PUT', `/client/${uuid}?project_env=acme-production`, { ipWhitelist: ['192.168.0.0/16'] })).status,
        ).toBe(200);
        const outside = await drift('payments');
        expect(outside.code).toBe(2);
        expect(categoriesOf(outside.report, 'client.acme-production/globex')).toEqual(['changed_outside']);

        // A applies the edit (and repairs the allow-list): its update records the new digest.
        expectOk(await tf(a, 'apply', '-auto-approve', '-var', 'meta=billing'), 'apply A (meta=billing)');
        expect(liveClient().ipWhitelist).toEqual(['10.0.0.0/8']);
        const applied = await drift('billing');
        expect(applied.code, JSON.stringify(applied.report.items)).toBe(0);
      },
      patient(180_000),
    );

    it(
      "B may import A's objects, but not change them, issue keys on them, create a second one or destroy them",
      async () => {
        expectOk(await tf(b, 'apply', '-auto-approve', '-var', 'meta=billing'), 'apply B (import only)');
        const before = JSON.stringify([liveClient(), liveEndpoint()]);

        refused(await tf(b, 'apply', '-auto-approve', '-var', 'meta=team-b'), 'team-a');
        refused(await tf(b, 'plan', '-var', 'meta=billing', '-var', 'extra_key=true'), 'team-a');
        // A second client of the same identity (the service would hold two 'globex'): refused too.
        const dup = await tf(b, 'plan', '-var', 'meta=billing', '-var', 'dup=true');
        refused(dup, 'team-a');
        expect(dup.stderr.replace(/\s*│\s*/g, ' ')).toMatch(/does not create a second one/);
        refused(await tf(b, 'destroy', '-auto-approve', '-var', 'meta=billing'), 'team-a');

        expect(JSON.stringify([liveClient(), liveEndpoint()])).toBe(before);
        expect(liveClient().metadata).toMatchObject({ team: 'billing', [OWNER_ID_KEY]: 'team-a' });
        expect(liveClient().keys.map((k: any) => k.name)).toEqual(['primary']);
      },
      patient(180_000),
    );

    it(
      'with take_ownership B claims them; then A is refused, and B can destroy them',
      async () => {
        expectOk(
          await tf(b, 'apply', '-auto-approve', '-var', 'meta=team-b', '-var', 'take=true'),
          'apply B (take_ownership)',
        );
        expect(liveClient().metadata).toMatchObject({
          team: 'team-b',
          [OWNER_ID_KEY]: 'team-b',
          [APPLIED_KEY]: expect.stringMatching(/^[0-9a-f]{16}$/),
        });

        refused(await tf(a, 'plan', '-var', 'meta=billing'), 'team-b');
        expect(liveClient().metadata).toMatchObject({ team: 'team-b', [OWNER_ID_KEY]: 'team-b' });

        expectOk(
          await tf(b, 'destroy', '-auto-approve', '-var', 'meta=team-b', '-var', 'take=true'),
          'destroy B (take_ownership)',
        );
        expect(liveClient()).toBeUndefined();
        expect(liveEndpoint()).toBeUndefined();
      },
      patient(180_000),
    );
  },
);
