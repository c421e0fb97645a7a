// Benchmark hook of the CDKTF front end (for bench/, issue 16): a CDKTF stack of N clients that
// describes exactly what the emulator's seed creates, then
//   synth   running the app (node main.ts, as kms-sync --cdktf does),
//   load    reading cdk.tf.json into the desired state (expressions, references, YAML rules),
//   plan    reading the live state over HTTP and diffing: a no-op plan, checked to be empty,
// each timed on its own. Needs `npm run build` (it uses dist/).
//
//   node scripts/cdktf-bench.js [--clients 10000] [--templates 10] [--keys 1] [--url URL --api-key KEY]
//
// Without --url it starts an in-process emulator and seeds it. From code:
//   import { benchCdktf } from '../scripts/cdktf-bench.js';
//   const r = await benchCdktf({ clients: 10_000 });   // { synthMs, loadMs, readLiveMs, diffMs, planMs, ... }
import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import { KmsClient } from '../dist/api/client.js';
import { loadCdktf } from '../dist/cdktf/index.js';
import { loadDesiredState } from '../dist/config/index.js';
import { startEmulator } from '../dist/emulator/index.js';
import { readLiveState } from '../dist/live/read.js';
import { buildPlan } from '../dist/plan/diff.js';

const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const SEED_URL = 'https://api.example.test';
/** What kms-sync writes on what it creates; the seed puts it on the seeded clients. */
const OWNED = { 'managed-by': 'kms-sync' };

/**
 * main.ts of a stack matching the emulator's seed of one environment: templates tpl-000..
 * (rateLimitDay 1000+i, maxClients ceil(clients/templates)+10), clients client-00000.. (company,
 * template i % templates, ipWhitelist 10.0.0.0/8, metadata { index }, keys key-0..).
 */
export function seededStackSource({
  project = 'bench',
  type = 'production',
  clients = 10_000,
  templates = 10,
  keysPerClient = 1,
} = {}) {
  const maxClients = Math.ceil(clients / templates) + 10;
  return `import { App, TerraformStack } from 'cdktf';
import { KmsProject, KmsProvider } from 'kms-sync/cdktf';

const app = new App();
const stack = new TerraformStack(app, 'bench');
new KmsProvider(stack, 'kms', {});
const project = new KmsProject(stack, ${JSON.stringify(project)}, { slug: ${JSON.stringify(project)}, name: ${JSON.stringify(project)} });
const env = project.addEnvironment(${JSON.stringify(type)}, { url: ${JSON.stringify(SEED_URL)} });
const pad = (n: number, w: number) => String(n).padStart(w, '0');
for (let i = 0; i < ${templates}; i++) env.addTemplate(\`tpl-\${pad(i, 3)}\`, { rateLimitDay: 1000 + i, maxClients: ${maxClients} });
for (let i = 0; i < ${clients}; i++) {
  const keys: Record<string, object> = {};
  for (let k = 0; k < ${keysPerClient}; k++) keys[\`key-\${k}\`] = {};
  env.addClient(\`client-\${pad(i, 5)}\`, {
    type: 'company', template: env.template(\`tpl-\${pad(i % ${templates}, 3)}\`), ipWhitelist: ['10.0.0.0/8'], metadata: { index: String(i) }, keys,
  });
}
app.synth();
`;
}

/** A scratch CDKTF project whose packages resolve to this repository's build. */
function scratchProject(source) {
  const dir = mkdtempSync(path.join(tmpdir(), 'kms-sync-cdktf-bench-'));
  mkdirSync(path.join(dir, 'node_modules'));
  symlinkSync(repoRoot, path.join(dir, 'node_modules', 'kms-sync'), 'dir');
  for (const pkg of ['cdktf', 'constructs'])
    symlinkSync(path.join(repoRoot, 'node_modules', pkg), path.join(dir, 'node_modules', pkg), 'dir');
  writeFileSync(path.join(dir, 'package.json'), '{ "type": "module", "private": true }\n');
  writeFileSync(path.join(dir, 'cdktf.json'), JSON.stringify({ language: 'typescript', app: 'node main.ts' }) + '\n');
  writeFileSync(path.join(dir, 'main.ts'), source);
  return dir;
}

/**
 * Synth, load and no-op plan of a stack of `clients` clients. With `url`/`apiKey` the service must
 * already hold the seeded environment; otherwise an in-process emulator is started and seeded.
 */
export async function benchCdktf(o = {}) {
  const spec = { project: 'bench', type: 'production', clients: 10_000, templates: 10, keysPerClient: 1, ...o };
  const apiKey = o.apiKey ?? 'sk_test_cdktfbench0123456789';
  const emu = o.url ? undefined : await startEmulator({ port: 0, apiKeys: [apiKey] });
  const dir = scratchProject(seededStackSource(spec));
  try {
    if (emu) {
      emu.service.seed({
        project: spec.project,
        type: spec.type,
        url: SEED_URL,
        templates: spec.templates,
        clients: spec.clients,
        keysPerClient: spec.keysPerClient,
        endpoints: 0,
        metadata: OWNED,
      });
    }
    const cdktf = await loadCdktf({ dir, cwd: dir });
    if (cdktf.diagnostics.length)
      throw new Error(
        `the bench stack has problems: ${cdktf.diagnostics
          .slice(0, 3)
          .map((d) => d.message)
          .join('; ')}`,
      );
    const t0 = performance.now();
    const { state } = await loadDesiredState([], { cwd: dir, documents: cdktf.documents });
    const buildMs = performance.now() - t0;
    const api = new KmsClient({ baseUrl: o.url ?? emu.url, apiKey, parallelism: 8, userAgent: 'kms-sync-bench' });
    const t1 = performance.now();
    const live = await readLiveState(
      api,
      { projects: [spec.project], envs: [`${spec.project}-${spec.type}`] },
      { fingerprints: false },
    );
    const t2 = performance.now();
    const plan = buildPlan({
      desired: state,
      live,
      prune: false,
      now: new Date(),
      target: {
        url: o.url ?? emu.url,
        credential: 'test',
        envs: [`${spec.project}-${spec.type}`],
        projects: [spec.project],
      },
    });
    const t3 = performance.now();
    await api.close();
    if (plan.operations.length || plan.unmanaged.length) {
      throw new Error(
        `the no-op plan is not empty: ${JSON.stringify(plan.summary)} (${plan.operations
          .slice(0, 3)
          .map((op) => `${op.action} ${op.address}`)
          .join('; ')})`,
      );
    }
    return {
      clients: spec.clients,
      keys: spec.clients * spec.keysPerClient,
      /** Running the app: node main.ts writing cdktf.out. */
      synthMs: cdktf.synthMs,
      /** cdk.tf.json → documents (expressions, references) plus the configuration builder. */
      loadMs: cdktf.readMs + buildMs,
      readLiveMs: t2 - t1,
      diffMs: t3 - t2,
      /** Read of the live state plus diff: the no-op plan. */
      planMs: t3 - t1,
      requests: { ...api.http?.requestCounts },
    };
  } finally {
    rmSync(dir, { recursive: true, force: true });
    await emu?.close();
  }
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const arg = (name, dflt) => {
    const i = process.argv.indexOf(`--${name}`);
    return i > 0 ? process.argv[i + 1] : dflt;
  };
  const r = await benchCdktf({
    clients: Number(arg('clients', '10000')),
    templates: Number(arg('templates', '10')),
    keysPerClient: Number(arg('keys', '1')),
    ...(arg('url') ? { url: arg('url'), apiKey: arg('api-key', process.env.KMS_API_KEY) } : {}),
  });
  const ms = (n) => `${Math.round(n).toLocaleString('en')} ms`;
  process.stdout.write(
    `CDKTF stack of ${r.clients.toLocaleString('en')} clients (${r.keys.toLocaleString('en')} keys): ` +
      `synth ${ms(r.synthMs)}, load ${ms(r.loadMs)}, no-op plan ${ms(r.planMs)} (read ${ms(r.readLiveMs)}, diff ${ms(r.diffMs)})\n`,
  );
  process.stdout.write(`${JSON.stringify(r)}\n`);
}
