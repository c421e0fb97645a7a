// The ephemeral recipe with the real terraform binary, offline: examples/terraform/ephemeral/main.tf
// (kms_key, then ephemeral kms_key_secret, the project key from an ephemeral variable) with a
// write-only consumer, sink_secret of a small provider of the test suite (fixtures/sink-provider.mjs)
// that writes what it receives to a file, as a secret manager would keep it. The raw key reaches the
// consumer, and appears nowhere else: not in the state, the saved plans (unzipped), `terraform show
// -json` of plans and state, TF_LOG=TRACE logs, any file of the run, nor any output — as itself,
// in base64 or in hex. The project key (ephemeral variable) is not in the plans or the state either.
// Runs with each of terraform and tofu that is on PATH and >= 1.11 (OpenTofu's mirror entries are
// under registry.opentofu.org), and prints a `SKIPPED: <why>` line for each that is not.
import { execFileSync } from 'node:child_process';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startEmulator, type RunningEmulator } from '../../src/emulator/index.js';
import { zipEntries, zipEntryData } from '../../src/provider/release.js';
import { RAW_KEY_PATTERN, repoRoot, workspace } from '../support/cli.js';
import { skipWhen } from '../support/skip.js';
import {
  decryptStore,
  expectOk,
  filesUnder,
  mirrorProvider,
  offlineTerraform,
  onPath,
  type OfflineTerraform,
  type Run,
} from './terraform-support.js';
import { patient } from '../support/patience.js';

/** Write-only arguments came with Terraform 1.11 (ephemeral resources with 1.10), to OpenTofu with 1.11. */
function versionOf(bin: string | undefined): string | undefined {
  if (!bin) return undefined;
  try {
    return (
      JSON.parse(
        execFileSync(bin, ['version', '-json'], {
          encoding: 'utf8',
          env: { PATH: process.env.PATH, CHECKPOINT_DISABLE: '1' },
        }),
      ) as { terraform_version?: string }
    ).terraform_version;
  } catch {
    return undefined;
  }
}
const tooOld = (v: string | undefined) => {
  const [major, minor] = (v ?? '0.0').split('.').map(Number);
  return major! < 1 || (major === 1 && minor! < 11);
};
const BINARIES = (['terraform', 'tofu'] as const).map((name) => {
  const bin = onPath(name);
  const version = versionOf(bin);
  const skip = !bin
    ? `${name} is not on PATH`
    : tooOld(version)
      ? `${name} ${version ?? '(version unknown)'} is older than 1.11, which write-only arguments need`
      : undefined;
  return { name, bin, version, skip };
});

const API_KEY = 'sk_test_ephemeralrecipe0123456789';
const SINK = { namespace: 'kms-test', type: 'sink', version: '0.0.1' };
/** The consumer: added to the recipe's required_providers (a module has one such block) and a file of its own. */
const SINK_REQUIREMENT = `required_providers {
    sink = {
      source  = "${SINK.namespace}/${SINK.type}"
      version = "${SINK.version}"
    }`;
const SINK_TF = `resource "sink_secret" "globex_primary" {
  file             = "\${path.root}/../delivered/globex-primary"
  value_wo         = ephemeral.kms_key_secret.globex_primary.value
  value_wo_version = local.globex_key_version
}
`;

/** The texts a saved plan holds: every entry of the zip, unpacked. */
const planTexts = (file: string) => {
  const zip = readFileSync(file);
  return zipEntries(zip).map((e) => zipEntryData(zip, e.name).toString('latin1'));
};

for (const { name, bin, version, skip } of BINARIES)
  describe.skipIf(skipWhen(skip !== undefined, `test/provider/ephemeral-terraform.test.ts (${name}): ${skip}`))(
    `ephemeral kms_key_secret into a write-only argument (${name} ${version})`,
    () => {
      let emu: RunningEmulator;
      let root: string;
      let dir: string;
      let terraform: OfflineTerraform;
      const tf = (...args: string[]): Promise<Run> => terraform.run(dir, args);
      /** TF_LOG=TRACE into a file of the run (searched with the rest). */
      const traced = (log: string, ...args: string[]) =>
        terraform.run(dir, args, { TF_LOG: 'TRACE', TF_LOG_PATH: path.join(root, `${log}.trace.log`) });

      beforeAll(async () => {
        emu = await startEmulator({ port: 0, apiKeys: [API_KEY] });
        root = workspace();
        // The project key reaches the provider only through the ephemeral variable.
        terraform = offlineTerraform(bin!, root, { url: emu.url, apiKey: '' });
        terraform.env.TF_VAR_kms_api_key = API_KEY;
        mirrorProvider(
          path.join(root, 'mirror'),
          SINK,
          path.join(repoRoot, 'test', 'provider', 'fixtures', 'sink-provider.mjs'),
        );
        dir = path.join(root, 'recipe');
        mkdirSync(dir);
        mkdirSync(path.join(root, 'delivered'));
        const recipe = readFileSync(path.join(repoRoot, 'examples', 'terraform', 'ephemeral', 'main.tf'), 'utf8');
        expect(recipe).toContain('required_providers {');
        writeFileSync(path.join(dir, 'main.tf'), recipe.replace('required_providers {', SINK_REQUIREMENT));
        writeFileSync(path.join(dir, 'sink.tf'), SINK_TF);
        expectOk(await tf('init', '-input=false', '-no-color'), 'init');
      }, patient(120_000));

      afterAll(async () => {
        await emu?.close();
      });

      it(
        'lists kms_key_secret in `providers schema -json`, its value sensitive',
        async () => {
          const r = await tf('providers', 'schema', '-json');
          expectOk(r, 'providers schema');
          // registry.terraform.io/kms-sync/kms (Terraform) or registry.opentofu.org/kms-sync/kms (OpenTofu)
          const all = JSON.parse(r.stdout).provider_schemas as Record<string, any>;
          const schemas = Object.entries(all).find(([address]) => address.endsWith('/kms-sync/kms'))![1];
          expect(schemas.ephemeral_resource_schemas.kms_key_secret.block.attributes.value).toMatchObject({
            type: 'string',
            computed: true,
            sensitive: true,
          });
        },
        patient(60_000),
      );

      it(
        'delivers the key to the write-only argument, re-plans to no change, and the raw key is in no artefact of the run',
        async () => {
          const plan = await traced('plan', 'plan', '-input=false', '-no-color', '-out=tfplan');
          expectOk(plan, 'plan');
          expect(plan.stdout).toMatch(/Plan: 6 to add/);
          expect(plan.stdout).toMatch(/value_wo\s+= \(write-only attribute\)/);
          const apply = await traced('apply', 'apply', '-input=false', '-no-color', 'tfplan');
          expectOk(apply, 'apply');
          expect(apply.stdout).toMatch(/ephemeral\.kms_key_secret\.globex_primary: Opening complete/);

          // Delivered: the consumer holds exactly the key kms-sync's store holds.
          const raw = (
            await decryptStore(path.join(dir, '.kms-sync', 'secrets.sops.yaml'), path.join(root, 'age', 'keys.txt'))
          )['acme-production/globex/primary']!;
          expect(raw).toMatch(RAW_KEY_PATTERN);
          const deliveredFile = path.join(root, 'delivered', 'globex-primary');
          expect(readFileSync(deliveredFile, 'utf8')).toBe(raw);

          const again = await traced(
            'replan',
            'plan',
            '-input=false',
            '-no-color',
            '-detailed-exitcode',
            '-out=tfplan2',
          );
          expect(again.code, `${again.stdout}\n${again.stderr}`).toBe(0);
          expect(again.stdout).toMatch(/No changes/);
          const shows = await Promise.all([
            tf('show', '-json', 'tfplan'),
            tf('show', '-json', 'tfplan2'),
            tf('show', '-json'),
          ]);
          for (const s of shows) expectOk(s, 'show -json');
          const state = JSON.parse(shows[2]!.stdout).values.root_module.resources as {
            address: string;
            values: Record<string, unknown>;
            sensitive_values: unknown;
          }[];
          expect(state.find((r) => r.address === 'sink_secret.globex_primary')!.values.value_wo).toBeNull();
          expect(state.map((r) => r.address)).not.toContain('ephemeral.kms_key_secret.globex_primary');

          // Every artefact: files of the run (the consumer's own copy aside), the saved plans unpacked,
          // `show -json`, every output and log of terraform and the providers.
          const forms = [raw, Buffer.from(raw).toString('base64'), Buffer.from(raw).toString('hex')];
          const artefacts: [string, string][] = [
            ...filesUnder(root)
              .filter((f) => f !== deliveredFile)
              .map((f): [string, string] => [path.relative(root, f), readFileSync(f, 'latin1')]),
            ...['tfplan', 'tfplan2'].flatMap((p) =>
              planTexts(path.join(dir, p)).map((t, i): [string, string] => [`${p} entry ${i}`, t]),
            ),
            ...terraform.outputs.map((o, i): [string, string] => [`output ${i}`, o]),
          ];
          expect(artefacts.length).toBeGreaterThan(20);
          expect(artefacts.map(([name]) => name)).toEqual(
            expect.arrayContaining(['recipe/terraform.tfstate', 'plan.trace.log', 'apply.trace.log']),
          );
          const hits = artefacts.filter(([, text]) => forms.some((f) => text.includes(f))).map(([name]) => name);
          expect(hits, 'the raw key (or its base64/hex) found in these artefacts').toEqual([]);
          // The project key came from an ephemeral variable: in neither plan nor state.
          const kept = [
            ...planTexts(path.join(dir, 'tfplan')),
            ...planTexts(path.join(dir, 'tfplan2')),
            readFileSync(path.join(dir, 'terraform.tfstate'), 'utf8'),
            ...shows.map((s) => s.stdout),
          ];
          expect(kept.filter((t) => t.includes(API_KEY)).length, 'the project key in a plan or the state').toBe(0);
        },
        patient(240_000),
      );

      it(
        'destroys what it made, opening the secret while the key still exists',
        async () => {
          const r = await tf('destroy', '-auto-approve', '-input=false', '-no-color');
          expectOk(r, 'destroy');
          expect(r.stdout).toMatch(/Destroy complete! Resources: 6 destroyed/);
          for (const o of terraform.outputs) expect(o).not.toMatch(RAW_KEY_PATTERN);
        },
        patient(120_000),
      );
    },
  );
