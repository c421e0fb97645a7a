// `npm run bench`: kms-sync timed as its users see it (issue 16). Every scenario runs the real
// command line as a fresh process (`node dist/bin/kms-sync.js …`) on a real configuration file, against
// the emulator in its own process with 20 ms added to every request, and is timed from spawn to
// exit. Beside that whole-process wall time, the process reports its own phases (start-up, command
// import, config load, secret-name check, live read, plan, the rest: apply and output) through
// KMS_SYNC_PROFILE, and the emulator counts the requests. The per-resource baseline (a
// Terraform-like refresh, bench/worker.js) is kept where it applies.
//
//   node bench/run.js [--quick] [--runs N] [--latency-ms MS] [--parallelism N] [--only 1,3]
//                     [--full-baseline] [--out FILE] [--json] [--cli OTHER/dist/bin/kms-sync.js]
//
// --cli times another checkout's build: its CLI, its in-process diff (scenario 9, OTHER/bench/worker.js)
// and its CDKTF bindings (scenario 10's app), so that each side of a comparison runs its own code.
//
// Targets are shown, never asserted: CI runs `--quick` (tiny sizes, no latency, one run) to prove
// the benchmark works. bench/results.json holds the last full run.
import { fork, spawn } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { KmsClient } from '../dist/api/client.js';
import { AgeKeys, SopsFileStore } from '../dist/secrets/index.js';
import { seededStackSource } from '../scripts/cdktf-bench.js';
import { BENCH_OWNER, fleetEnvType, fleetProject, writeConfig, writeFleetConfig } from './lib/config-files.js';
import { OWNED, SEED_URL, desiredState, seedRequest as fixtureSeed, templateName } from './lib/fixtures.js';
import { findTerraform, terraformSideBySide } from './lib/terraform-side-by-side.js';

/** The seed stamps what it creates as this configuration's own (kms-sync/owner), as an apply would. */
const seedRequest = (env) => ({ ...fixtureSeed(env), metadata: { ...OWNED, 'kms-sync/owner': BENCH_OWNER } });

const here = path.dirname(fileURLToPath(import.meta.url));
const cliPath = process.argv.includes('--cli')
  ? path.resolve(process.argv[process.argv.indexOf('--cli') + 1])
  : path.join(here, '..', 'dist', 'bin', 'kms-sync.js');
const API_KEY = 'sk_test_bench0123456789';
// The checkout the timed build belongs to (--cli OTHER/dist/bin/kms-sync.js: OTHER): scenario 9's in-process
// worker and scenario 10's CDKTF app run its code too, not this checkout's.
const buildRoot = path.resolve(cliPath, '..', '..', '..');

// ------------------------------------------------------------------ options
function parseArgs(argv) {
  const o = { quick: false, fullBaseline: false, json: false };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    const value = () => {
      const v = argv[++i];
      if (v === undefined) throw new Error(`${a} needs a value`);
      return v;
    };
    if (a === '--quick') o.quick = true;
    else if (a === '--full-baseline') o.fullBaseline = true;
    else if (a === '--fleet-full') o.fleetFull = true;
    else if (a === '--cli') o.cli = path.resolve(value());
    else if (a === '--provider') o.provider = path.resolve(value());
    else if (a === '--tf-clients') o.tfClients = Number(value());
    else if (a === '--json') o.json = true;
    else if (a === '--runs') o.runs = Number(value());
    else if (a === '--latency-ms') o.latencyMs = Number(value());
    else if (a === '--parallelism') o.parallelism = Number(value());
    else if (a === '--only') o.only = value().split(',').map(Number);
    else if (a === '--out') o.out = path.resolve(value());
    else if (a === '--help' || a === '-h') {
      process.stdout.write(
        'usage: node bench/run.js [--quick] [--runs N] [--latency-ms MS] [--parallelism N] [--only 1,2,..] [--full-baseline] [--out FILE] [--json]\n' +
          '       scenario 11: [--tf-clients N] [--provider OTHER_BUILD/dist/provider-bin/terraform-provider-kms.js] (timed beside this build;\n' +
          '       bench/lib/null-provider.js: a provider that does nothing per call, the floor Terraform itself sets)\n',
      );
      process.exit(0);
    } else throw new Error(`unknown option ${a}`);
  }
  return o;
}

const opts = parseArgs(process.argv.slice(2));
const quick = opts.quick;
const latencyMs = opts.latencyMs ?? (quick ? 0 : 20);
const parallelism = opts.parallelism ?? 8; // the CLI's default --parallelism
const out = opts.out ?? path.join(here, quick ? 'results.local.json' : 'results.json');
const runsFor = (n) => opts.runs ?? (quick ? 1 : n);
const warmups = quick ? 0 : 1;
const size = (full, tiny) => (quick ? tiny : full);
const env10k = { templates: 20, clients: size(10_000, 60), keysPerClient: 2, endpoints: size(1_000, 12) };
const pages = (n) => Math.max(1, Math.ceil(n / 100));

const scenarios = [
  {
    id: 1,
    key: 'startup',
    title: 'kms-sync --version / --help',
    mode: 'startup',
    runs: runsFor(10),
    targets: { maxWallMs: 150 },
  },
  {
    id: 2,
    key: 'validate-10k',
    title: `validate, ${env10k.clients.toLocaleString('en')} clients (YAML)`,
    mode: 'validate',
    runs: runsFor(5),
    env: { project: 'val', type: 'production', ...env10k },
    file: 'kms.yaml',
    targets: { maxWallMs: 500 },
  },
  {
    id: 3,
    key: 'validate-10k-json',
    title: `validate, ${env10k.clients.toLocaleString('en')} clients (JSON)`,
    mode: 'validate',
    runs: runsFor(5),
    env: { project: 'val', type: 'production', ...env10k },
    file: 'kms.json',
    targets: { maxWallMs: 500 },
  },
  {
    id: 4,
    key: 'noop-10k',
    title: `no-op plan, ${env10k.clients.toLocaleString('en')} clients + ${env10k.endpoints.toLocaleString('en')} endpoints`,
    mode: 'noop',
    runs: runsFor(5),
    env: { project: 'noop', type: 'production', ...env10k },
    targets: { maxWallMs: 800, maxRequests: 120 },
    baseline: { sample: undefined },
  },
  {
    id: 5,
    key: 'noop-100k',
    title: `no-op plan, ${size(100_000, 300).toLocaleString('en')} clients`,
    mode: 'noop',
    runs: runsFor(3),
    env: {
      project: 'big',
      type: 'production',
      templates: 20,
      clients: size(100_000, 300),
      keysPerClient: 2,
      endpoints: size(1_000, 12),
    },
    targets: { maxWallMs: 5000, maxRssMB: 1024 },
    baseline: { sample: opts.fullBaseline || quick ? undefined : 10_000 },
  },
  {
    id: 6,
    key: 'create-1k',
    title: `create ${size(1_000, 20).toLocaleString('en')} clients with 2 keys, all stored`,
    mode: 'create',
    runs: runsFor(3),
    env: {
      project: 'create',
      type: 'production',
      templates: 20,
      clients: size(1_000, 20),
      keysPerClient: 2,
      endpoints: 0,
    },
    targets: { maxWallMs: 2000 },
  },
  {
    id: 7,
    key: 'update-1pct',
    title: `update 1% of ${env10k.clients.toLocaleString('en')} clients`,
    mode: 'update',
    runs: runsFor(3),
    env: { project: 'upd', type: 'production', ...env10k, changeEvery: 100 },
    targets: {},
    baseline: { sample: undefined },
  },
  {
    id: 8,
    key: 'rotate-100',
    title: `rotate ${size(100, 10)} keys, store of ${size(3_000, 60).toLocaleString('en')} secrets`,
    mode: 'rotate',
    runs: runsFor(3),
    env: {
      project: 'rot',
      type: 'production',
      templates: 20,
      clients: size(1_500, 30),
      keysPerClient: 2,
      endpoints: 0,
    },
    rotate: size(100, 10),
    targets: { maxWallMs: 3000 },
  },
  {
    id: 9,
    key: 'diff-100k',
    title: `diff only, ${size(100_000, 1_000).toLocaleString('en')} clients in memory (1% changed; in-process)`,
    mode: 'diff',
    runs: runsFor(3),
    env: {
      project: 'mem',
      type: 'production',
      templates: 20,
      clients: size(100_000, 1_000),
      keysPerClient: 2,
      endpoints: size(1_000, 12),
      changeEvery: 100,
    },
    targets: { maxWallMs: 1000 },
  },
  {
    // The CDKTF front end (scripts/cdktf-bench.js writes the app): the app's synth alone, the no-op
    // plan of its output (`plan --cdktf-out`), and both in one run as a user types it (`plan --cdktf`).
    id: 10,
    key: 'cdktf-10k',
    title: `CDKTF synth + no-op plan, ${env10k.clients.toLocaleString('en')} clients`,
    mode: 'cdktf',
    runs: runsFor(3),
    env: {
      project: 'cdk',
      type: 'production',
      templates: env10k.templates,
      clients: env10k.clients,
      keysPerClient: 2,
      endpoints: 0,
    },
    targets: {},
  },
  {
    // The Terraform provider next to Terraform's built-in terraform_data (bench/lib/terraform-side-by-side.js):
    // `terraform plan` of the same number of resources, each on its applied state. Needs terraform on PATH.
    id: 11,
    key: 'terraform-plan-1k',
    title: `terraform plan, ${(opts.tfClients ?? size(1_000, 20)).toLocaleString('en')} kms_client vs terraform_data`,
    mode: 'terraform',
    runs: runsFor(5),
    env: { project: 'tfbench', type: 'production', clients: opts.tfClients ?? size(1_000, 20) },
    targets: { maxRatio: 1.3 },
  },
  {
    // A fleet (issue 37): projects × environments × clients, planned environment by environment.
    // The full size (1,000,000 clients over 100 environments, 221 MB of YAML) is `--only 12
    // --fleet-full`; by default 100,000 clients over 10 environments, and 100,000 in one.
    id: 12,
    key: 'fleet',
    title: 'no-op plan of a fleet',
    mode: 'fleet',
    runs: runsFor(1),
    fleets: quick
      ? [{ projects: 2, envsPerProject: 2, clientsPerEnv: 50 }]
      : opts.fleetFull
        ? [
            { projects: 10, envsPerProject: 10, clientsPerEnv: 10_000, target: { maxWallMs: 15_000, maxRssMB: 1000 } },
            { projects: 1, envsPerProject: 1, clientsPerEnv: 100_000, target: { maxWallMs: 1200, maxRssMB: 400 } },
          ]
        : [
            { projects: 2, envsPerProject: 5, clientsPerEnv: 10_000 },
            { projects: 1, envsPerProject: 1, clientsPerEnv: 100_000, target: { maxWallMs: 1200, maxRssMB: 400 } },
          ],
    targets: {},
  },
  {
    // Apply of a fleet (issue 37): every client created (no keys: the store's own cost is scenario
    // 8's), the plan held whole (KMS_SYNC_APPLY_HOLD_OPERATIONS above its size: the path before
    // issue 37) and applied environment by environment (the default limit, 20,000 operations).
    id: 13,
    key: 'fleet-apply',
    title: 'apply of a fleet (client creates), whole vs environment by environment',
    mode: 'fleet',
    apply: true,
    runs: runsFor(1),
    fleets: quick
      ? [
          { projects: 2, envsPerProject: 2, clientsPerEnv: 50, hold: '1000000' },
          { projects: 2, envsPerProject: 2, clientsPerEnv: 50, hold: '0' },
        ]
      : [
          { projects: 2, envsPerProject: 5, clientsPerEnv: 10_000, hold: '1000000' },
          { projects: 2, envsPerProject: 5, clientsPerEnv: 10_000 },
        ],
    targets: {},
  },
].filter((s) => !opts.only || opts.only.includes(s.id));

/** An apply fleet whose plan stays under KMS_SYNC_APPLY_HOLD_OPERATIONS (default 20,000): held whole. */
const heldWhole = (f) => f.projects * f.envsPerProject * f.clientsPerEnv <= Number(f.hold ?? 20_000);

/**
 * A plan fleet's configuration, written once into the bench's own cache folder (bench/.cache,
 * ignored by git) and kept: the 1,000,000-client file (221 MB) takes a minute to write. An apply
 * fleet's (`fresh`) goes to a scratch folder of its own: the apply leaves its files beside it.
 */
function fleetConfig(f, envState, fresh) {
  const dir = fresh
    ? scratch()
    : path.join(here, '.cache', `fleet-${f.projects}x${f.envsPerProject}x${f.clientsPerEnv}`);
  const file = path.join(dir, 'kms.yaml');
  const done = path.join(dir, 'kms.yaml.bytes');
  if (existsSync(done)) return { dir, bytes: Number(readFileSync(done, 'utf8')) };
  mkdirSync(dir, { recursive: true });
  const bytes = writeFleetConfig(file, f, envState);
  writeFileSync(done, String(bytes));
  return { dir, bytes };
}

/** The request count a perfect reader needs for a seeded environment. */
function limitRequests(s) {
  const e = s.env;
  if (s.mode === 'noop') return 2 + pages(e.clients) + pages(e.endpoints);
  if (s.mode === 'update') return 2 + pages(e.clients) + pages(e.endpoints) + Math.ceil(e.clients / e.changeEvery);
  if (s.mode === 'create') return 4 + Math.ceil(e.clients / 100);
  return undefined;
}

// ------------------------------------------------------------------ processes
function startEmulatorChild() {
  return new Promise((resolve, reject) => {
    const child = fork(path.join(here, 'emulator-child.js'), [JSON.stringify({ apiKey: API_KEY, latencyMs })], {
      stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
    });
    let nextId = 0;
    const pending = new Map();
    child.on('message', (m) => {
      if (m?.type === 'ready') {
        resolve({
          url: m.url,
          control: m.url.replace(/\/api\/v1$/, '/__emulator'),
          usage: () =>
            new Promise((ok) => {
              const id = nextId++;
              pending.set(id, ok);
              child.send({ type: 'usage', id });
            }),
          stop: () =>
            new Promise((ok) => {
              child.once('exit', () => ok());
              child.send({ type: 'stop' });
            }),
        });
      } else if (m?.type === 'usage') {
        pending.get(m.id)?.(m);
        pending.delete(m.id);
      }
    });
    child.once('exit', (code) => reject(new Error(`emulator exited early (${code})`)));
  });
}

async function control(emu, method, route, body) {
  const r = await fetch(`${emu.control}${route}`, {
    method,
    headers: { 'content-type': 'application/json', 'x-api-key': API_KEY },
    ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
  });
  if (!r.ok) throw new Error(`${method} ${route}: ${r.status} ${await r.text()}`);
  return r.json();
}

/** One run of the real CLI in a fresh process, timed from spawn to exit; its profile and the emulator's counts around it. */
async function runCli(args, { cwd, env = {}, emu, expectCode = 0 }) {
  const profile = path.join(mkdtempSync(path.join(os.tmpdir(), 'kms-sync-profile-')), 'profile.json');
  if (emu) await control(emu, 'DELETE', '/counts');
  const emuCpu0 = emu ? (await emu.usage()).cpuMs : 0;
  const t0 = performance.now();
  const { code, stdout, stderr } = await new Promise((resolve) => {
    const child = spawn(process.execPath, [cliPath, ...args], {
      cwd,
      stdio: ['ignore', 'pipe', 'pipe'],
      env: {
        PATH: process.env.PATH,
        HOME: env.HOME ?? os.homedir(),
        NO_COLOR: '1',
        KMS_SYNC_PROFILE: profile,
        // The fleets measured here are larger than the default per-file and total configuration limits (5 MB / 50 MB).
        KMS_SYNC_MAX_FILE_SIZE: '1GB',
        KMS_SYNC_MAX_CONFIG_SIZE: '1GB',
        // e.g. KMS_SYNC_BENCH_NODE_OPTIONS='--cpu-prof --cpu-prof-dir=/tmp/prof' to profile the measured processes
        ...(process.env.KMS_SYNC_BENCH_NODE_OPTIONS ? { NODE_OPTIONS: process.env.KMS_SYNC_BENCH_NODE_OPTIONS } : {}),
        ...(emu ? { KMS_API_URL: emu.url, KMS_API_KEY: API_KEY } : {}),
        ...env,
      },
    });
    let so = '';
    let se = '';
    child.stdout.on('data', (d) => {
      so += d;
    });
    child.stderr.on('data', (d) => {
      se += d;
    });
    child.on('exit', (c) => resolve({ code: c, stdout: so, stderr: se }));
  });
  const wallMs = performance.now() - t0;
  if (code !== expectCode)
    throw new Error(
      `kms-sync ${args.join(' ')} exited ${code} (expected ${expectCode}): ${stderr.slice(-800) || stdout.slice(-800)}`,
    );
  const p = JSON.parse(readFileSync(profile, 'utf8'));
  rmSync(path.dirname(profile), { recursive: true, force: true });
  const requests = emu ? await control(emu, 'GET', '/counts') : {};
  const emulatorCpuMs = emu ? (await emu.usage()).cpuMs - emuCpu0 : undefined;
  const known = Object.values(p.phases).reduce((a, b) => a + b, 0);
  return {
    wallMs,
    cpuMs: p.cpuMs,
    maxRssKB: p.maxRssKB,
    stdout,
    phases: { ...p.phases, otherMs: Math.max(0, p.totalMs - known) },
    requests,
    totalRequests: Object.values(requests).reduce((a, b) => a + b, 0),
    emulatorCpuMs,
  };
}

/** bench/worker.js in a fresh process: the per-resource baseline and the in-memory diff. */
function runWorker(emu, spec, root = path.join(here, '..')) {
  return new Promise((resolve, reject) => {
    const child = fork(path.join(root, 'bench', 'worker.js'), [JSON.stringify(spec)], {
      stdio: ['ignore', 'pipe', 'inherit', 'ipc'],
      execArgv: ['--expose-gc'],
    });
    let stdout = '';
    const emuSide = {};
    child.stdout.on('data', (d) => {
      stdout += d;
    });
    child.on('message', async (m) => {
      if (m?.type !== 'mark') return;
      if (emu) {
        if (m.name === 'start') {
          await control(emu, 'DELETE', '/counts');
          emuSide.cpuStart = (await emu.usage()).cpuMs;
        } else {
          emuSide.cpuMs = (await emu.usage()).cpuMs - emuSide.cpuStart;
          emuSide.counts = await control(emu, 'GET', '/counts');
        }
      }
      child.send({ type: 'ack', name: m.name });
    });
    child.once('exit', () => {
      const line = stdout.trim().split('\n').pop() ?? '';
      let res;
      try {
        res = JSON.parse(line);
      } catch {
        reject(new Error(`worker ${spec.mode} printed no result: ${stdout.slice(-500)}`));
        return;
      }
      if (!res.ok) reject(new Error(`worker ${spec.mode} failed: ${res.error}`));
      else resolve({ ...res, emulatorCpuMs: emuSide.cpuMs, emulatorRequests: emuSide.counts });
    });
  });
}

// ------------------------------------------------------------------ scenarios
const tmpRoot = mkdtempSync(path.join(os.tmpdir(), 'kms-sync-bench-'));
let dirCount = 0;
const scratch = () => {
  const d = path.join(tmpRoot, String(dirCount++));
  mkdirSync(d, { recursive: true });
  return d;
};
/** A user's age identity and home, outside the configuration. */
async function userEnv() {
  const home = scratch();
  const env = { HOME: home, SOPS_AGE_KEY_FILE: path.join(home, 'age', 'keys.txt'), KMS_SYNC_ALLOW_LOCAL_STORE: '1' };
  await new AgeKeys({ env }).recipients();
  return env;
}

/**
 * Untimed: the seeded environment read whole a few times, so the emulator's own code is compiled
 * before the timed runs. It stands in for a service that has been running: a freshly started one
 * answered the first plans of 10,000 clients 250-350 ms later than the later plans.
 */
async function warmService(emu, env, rounds = 3) {
  const pe = `${env.project}-${env.type}`;
  const api = new KmsClient({ baseUrl: emu.url, apiKey: API_KEY, parallelism });
  for (let i = 0; i < rounds; i++) await Promise.all([api.getProject(pe), api.listClients(pe), api.listEndpoints(pe)]);
  await api.close();
}

async function repeat(s, fn) {
  const runs = [];
  for (let i = 0; i < warmups + s.runs; i++) {
    const r = await fn(i);
    if (i >= warmups) runs.push(r);
  }
  return runs;
}

const modes = {
  async terraform(s, emu) {
    const bin = findTerraform();
    if (!bin) return { skipped: 'neither terraform nor tofu is on PATH' };
    const dir = scratch();
    const side = await terraformSideBySide({
      bin,
      dir,
      providerBin: path.join(here, '..', 'dist', 'provider-bin', 'terraform-provider-kms.js'),
      service: { url: emu.url, apiKey: API_KEY },
      clients: s.env.clients,
      owner: BENCH_OWNER,
    });
    // --provider: another build's provider, on its own project of the same service, timed beside this one.
    const other = opts.provider
      ? await terraformSideBySide({
          bin,
          dir: scratch(),
          providerBin: opts.provider,
          service: { url: emu.url, apiKey: API_KEY },
          clients: s.env.clients,
          owner: BENCH_OWNER,
          slug: 'tfbench-other',
          withData: false,
        })
      : undefined;
    const kms = [];
    const data = [];
    const otherKms = [];
    // Alternating, so that a change of the machine's load weighs on all alike.
    for (let i = 0; i < warmups + s.runs; i++) {
      const d = await side.planData();
      const k = await side.planKms();
      const o = other ? await other.planKms() : undefined;
      if (i >= warmups) {
        data.push(d);
        kms.push(k);
        if (o) otherKms.push(o);
      }
    }
    const ratio = median(kms.map((r) => r.wallMs)) / median(data.map((r) => r.wallMs));
    // Wall and CPU of each plan; Terraform's own CPU is the total minus its provider processes'.
    const figures = (plans) => ({
      wallMs: round(median(plans.map((r) => r.wallMs))),
      runs: plans.map((r) => round(r.wallMs)),
      cpuMs: round(median(plans.map((r) => r.cpuMs))),
      cpuRuns: plans.map((r) => round(r.cpuMs)),
      providerCpuMs: round(median(plans.map((r) => r.providerCpuMs))),
      terraformCpuMs: round(median(plans.map((r) => r.cpuMs - r.providerCpuMs))),
    });
    const said = (f) =>
      `${round(f.wallMs)} ms wall (runs ${f.runs.join(', ')}), ${fmtMs(f.cpuMs)} CPU (runs ${f.cpuRuns.map(fmtMs).join(', ')}): Terraform ${fmtMs(f.terraformCpuMs)}, providers ${fmtMs(f.providerCpuMs)}`;
    const kmsFigures = figures(kms);
    const dataFigures = figures(data);
    const otherFigures = other ? figures(otherKms) : undefined;
    log(`  11. terraform_data: ${said(dataFigures)}`);
    log(
      `  11. kms_client (this build): ${said(kmsFigures)}; ${ratio.toFixed(2)}× terraform_data's wall, ${(kmsFigures.cpuMs / dataFigures.cpuMs).toFixed(2)}× its CPU`,
    );
    if (otherFigures)
      log(
        `  11. other provider (${opts.provider}): ${said(otherFigures)}; ${(otherFigures.wallMs / dataFigures.wallMs).toFixed(2)}× terraform_data's wall, ${(otherFigures.cpuMs / dataFigures.cpuMs).toFixed(2)}× its CPU, Terraform alone ${(otherFigures.terraformCpuMs / dataFigures.cpuMs).toFixed(2)}×`,
      );
    const runs = kms.map((r) => ({
      wallMs: r.wallMs,
      cpuMs: r.cpuMs,
      maxRssKB: 0,
      phases: {},
      requests: {},
      totalRequests: 0,
    }));
    return {
      runs,
      extra: {
        terraformData: dataFigures,
        kmsClient: kmsFigures,
        ...(otherFigures ? { otherProvider: { bin: opts.provider, ...otherFigures } } : {}),
        ratio: { time: Math.round(ratio * 1e4) / 1e4 },
        meetsRatio: ratio <= s.targets.maxRatio,
      },
    };
  },

  async startup(s) {
    const dir = scratch();
    const version = await repeat(s, () => runCli(['--version'], { cwd: dir }));
    const help = await repeat(s, () => runCli(['--help'], { cwd: dir }));
    return {
      runs: [...version, ...help],
      extra: { versionMs: median(version.map((r) => r.wallMs)), helpMs: median(help.map((r) => r.wallMs)) },
    };
  },

  async validate(s) {
    const dir = scratch();
    const bytes = writeConfig(path.join(dir, s.file), desiredState(s.env));
    const runs = await repeat(s, () => runCli(['validate', '-f', s.file], { cwd: dir }));
    if (!runs[0].stdout.includes(`${s.env.clients} client(s)`))
      throw new Error(`validate did not read ${s.env.clients} clients: ${runs[0].stdout}`);
    return { runs, extra: { configBytes: bytes } };
  },

  async noop(s, emu) {
    await control(emu, 'POST', '/seed', seedRequest(s.env));
    await warmService(emu, s.env);
    const dir = scratch();
    const bytes = writeConfig(path.join(dir, 'kms.yaml'), desiredState(s.env));
    // --no-secret-check: the seeded keys have no secrets in any store (their check is scenario 8's store work).
    const runs = await repeat(s, () =>
      runCli(
        ['plan', '-f', 'kms.yaml', '--detailed-exitcode', '--no-secret-check', '--parallelism', String(parallelism)],
        { cwd: dir, emu },
      ),
    );
    return { runs, extra: { configBytes: bytes } };
  },

  async update(s, emu) {
    await control(emu, 'POST', '/seed', seedRequest(s.env));
    await warmService(emu, s.env);
    const dir = scratch();
    const env = await userEnv();
    const changed = (i) => i % s.env.changeEvery === 0;
    const runs = await repeat(s, (run) => {
      writeConfig(path.join(dir, 'kms.yaml'), desiredState({ ...s.env, changed, revision: `run-${run}` }));
      return runCli(
        ['apply', '-f', 'kms.yaml', '--auto-approve', '--no-secret-check', '--parallelism', String(parallelism)],
        { cwd: dir, emu, env },
      );
    });
    return { runs };
  },

  async create(s, emu) {
    const env = await userEnv();
    const maxClients = Math.ceil(s.env.clients / s.env.templates) + 10;
    const runs = await repeat(s, async (run) => {
      const project = `${s.env.project}${run}`;
      const setup = new KmsClient({ baseUrl: emu.url, apiKey: API_KEY, parallelism: 4 });
      await setup.createProject({
        slug: project,
        name: project,
        envs: [
          {
            type: s.env.type,
            url: SEED_URL,
            templates: Array.from({ length: s.env.templates }, (_, i) => ({
              name: templateName(i),
              rateLimitDay: 1000 + i,
              maxClients,
            })),
          },
        ],
      });
      await setup.close();
      const dir = scratch();
      writeConfig(path.join(dir, 'kms.yaml'), desiredState({ ...s.env, project, maxClients }));
      const r = await runCli(['apply', '-f', 'kms.yaml', '--auto-approve', '--parallelism', String(parallelism)], {
        cwd: dir,
        emu,
        env,
      });
      // Untimed: every raw key is in the default store beside the configuration.
      const stored = await new SopsFileStore(path.join(dir, '.kms-sync', 'secrets.sops.yaml'), { env }).readAll();
      if (stored.size !== s.env.clients * s.env.keysPerClient)
        throw new Error(`${stored.size} keys stored, expected ${s.env.clients * s.env.keysPerClient}`);
      return r;
    });
    return { runs };
  },

  async rotate(s, emu) {
    await control(emu, 'POST', '/seed', seedRequest(s.env));
    const dir = scratch();
    const env = await userEnv();
    writeConfig(path.join(dir, 'kms.yaml'), desiredState(s.env));
    // Untimed: the default store already holds a secret for every key (as after the apply that made them).
    const pe = `${s.env.project}-${s.env.type}`;
    const store = new SopsFileStore(path.join(dir, '.kms-sync', 'secrets.sops.yaml'), { env });
    const live = new KmsClient({ baseUrl: emu.url, apiKey: API_KEY, parallelism: 8 });
    const clients = await live.listClients(pe);
    await live.close();
    await store.putMany(
      clients.flatMap((c) =>
        (c.keys ?? []).map((k) => ({
          name: `${pe}/${c.name}/${k.name}`,
          value: `kmsc_${'b'.repeat(43)}`,
          meta: {
            projectEnv: pe,
            client: c.name,
            key: k.name,
            keyId: k.id ?? k.key_uuid ?? 'seeded',
            issuedAt: new Date().toISOString(),
            expiresAt: null,
          },
        })),
      ),
    );
    // client-00000 … client-00099: the first `rotate` clients' key-0.
    const glob = s.rotate === 100 ? `key.${pe}/client-000*/key-0` : `key.${pe}/client-0000*/key-0`;
    const runs = await repeat(s, () =>
      runCli(['rotate', '-f', 'kms.yaml', '--key', glob, '--auto-approve', '--parallelism', String(parallelism)], {
        cwd: dir,
        emu,
        env,
      }),
    );
    if (!/rotated/.test(runs[0].stdout)) throw new Error(`rotate printed no rotation: ${runs[0].stdout.slice(-400)}`);
    return { runs, extra: { storeSecrets: clients.length * s.env.keysPerClient } };
  },

  async diff(s) {
    const runs = await repeat({ ...s, runs: s.runs }, () =>
      runWorker(undefined, { ...s.env, mode: 'diff', run: 0 }, buildRoot),
    );
    return { runs: runs.map((r) => ({ ...r, totalRequests: 0, requests: {} })) };
  },

  async fleet(s, emu) {
    // One scenario, several fleets: each seeded into a fresh emulator, planned (no-op) once.
    const results = [];
    for (const f of s.fleets) {
      const fleetEmu = emu ?? (await startEmulatorChild());
      const envSpec = (project, type) => ({
        project,
        type,
        templates: 20,
        clients: f.clientsPerEnv,
        keysPerClient: s.apply ? 0 : 1,
        endpoints: 10,
      });
      const t0 = performance.now();
      for (let p = 0; p < f.projects; p++) {
        for (let e = 0; e < f.envsPerProject; e++) {
          const spec = envSpec(fleetProject(p), fleetEnvType(e));
          // An apply's fleet has its environments, templates and endpoints, and none of its clients yet.
          await control(fleetEmu, 'POST', '/seed', seedRequest(s.apply ? { ...spec, clients: 0 } : spec));
        }
      }
      const { dir, bytes } = fleetConfig(f, (project, type) => desiredState(envSpec(project, type)), s.apply);
      const setupSeconds = round((performance.now() - t0) / 1000);
      // A fleet's configuration is larger than the default size limits (docs/configuration.md): raised for it.
      const runs = s.apply
        ? [
            await runCli(
              ['apply', '-f', 'kms.yaml', '--auto-approve', '--compact', '--parallelism', String(parallelism)],
              {
                cwd: dir,
                emu: fleetEmu,
                env: f.hold ? { KMS_SYNC_APPLY_HOLD_OPERATIONS: f.hold } : {},
              },
            ),
          ]
        : await repeat({ runs: s.runs }, () =>
            runCli(
              [
                'plan',
                '-f',
                'kms.yaml',
                '--detailed-exitcode',
                '--no-secret-check',
                '--parallelism',
                String(parallelism),
              ],
              { cwd: dir, emu: fleetEmu },
            ),
          );
      const emulatorMaxRssMB = round((await fleetEmu.usage()).maxRssKB / 1024);
      if (s.apply) rmSync(dir, { recursive: true, force: true });
      results.push({
        ...f,
        ...(s.apply ? { apply: true } : {}),
        clients: f.projects * f.envsPerProject * f.clientsPerEnv,
        configBytes: bytes,
        setupSeconds,
        emulatorMaxRssMB,
        kmsSync: summarise(runs),
      });
      const k = results.at(-1).kmsSync;
      const met = f.target ? (k.wallMs <= f.target.maxWallMs && k.maxRssMB <= f.target.maxRssMB ? ' ✓' : ' ✗') : '';
      log(
        `     ${s.apply ? `apply (${heldWhole(f) ? 'held whole' : 'environment by environment'}) ` : ''}fleet ${f.projects}×${f.envsPerProject}×${f.clientsPerEnv}: ${fmtMs(k.wallMs)}, ${k.maxRssMB} MB RSS, CPU ${fmtMs(k.cpuMs)}, emulator CPU ${fmtMs(k.emulatorCpuMs)} / ${emulatorMaxRssMB} MB RSS${f.target ? ` (target < ${fmtMs(f.target.maxWallMs)}, < ${f.target.maxRssMB} MB:${met})` : ''}`,
      );
      if (fleetEmu !== emu) await fleetEmu.stop();
    }
    // The scenario's own figures are its largest fleet's.
    return { runs: [], fleetRuns: results };
  },

  async cdktf(s, emu) {
    await control(emu, 'POST', '/seed', seedRequest(s.env));
    // A CDKTF project whose packages resolve to the timed build (as scripts/cdktf-bench.js does).
    const dir = scratch();
    const root = buildRoot;
    mkdirSync(path.join(dir, 'node_modules'));
    symlinkSync(root, path.join(dir, 'node_modules', 'kms-sync'), 'dir');
    for (const pkg of ['cdktf', 'constructs'])
      symlinkSync(path.join(root, 'node_modules', pkg), path.join(dir, 'node_modules', pkg), 'dir');
    writeFileSync(path.join(dir, 'package.json'), '{ "type": "module", "private": true }\n');
    writeFileSync(path.join(dir, 'cdktf.json'), `${JSON.stringify({ language: 'typescript', app: 'node main.ts' })}\n`);
    const source = seededStackSource({
      project: s.env.project,
      type: s.env.type,
      clients: s.env.clients,
      templates: s.env.templates,
      keysPerClient: s.env.keysPerClient,
    }).replace(
      "new KmsProvider(stack, 'kms', {})",
      `new KmsProvider(stack, 'kms', { owner: ${JSON.stringify(BENCH_OWNER)} })`,
    );
    if (!source.includes(BENCH_OWNER))
      throw new Error('the CDKTF bench stack no longer has the provider line this scenario gives an owner');
    writeFileSync(path.join(dir, 'main.ts'), source);
    const synthOnce = async () => {
      const t0 = performance.now();
      const code = await new Promise((resolve) => {
        const child = spawn(process.execPath, ['main.ts'], {
          cwd: dir,
          stdio: 'ignore',
          env: {
            PATH: process.env.PATH,
            HOME: os.homedir(),
            CDKTF_OUTDIR: path.join(dir, 'cdktf.out'),
            CHECKPOINT_DISABLE: '1',
          },
        });
        child.on('exit', resolve);
      });
      if (code !== 0) throw new Error(`the CDKTF app exited ${code}`);
      return performance.now() - t0;
    };
    const synth = [];
    for (let i = 0; i < warmups + s.runs; i++) {
      const ms = await synthOnce();
      if (i >= warmups) synth.push(ms);
    }
    const planOut = await repeat(s, () =>
      runCli(['plan', '--cdktf-out', 'cdktf.out', '--detailed-exitcode', '--no-secret-check'], { cwd: dir, emu }),
    );
    const planAll = await repeat(s, () =>
      runCli(['plan', '--cdktf', '.', '--detailed-exitcode', '--no-secret-check'], { cwd: dir, emu }),
    );
    return { runs: planAll, extra: { synthMs: round(median(synth)), planFromOutput: summarise(planOut) } };
  },
};

// ------------------------------------------------------------------ statistics
function median(xs) {
  const v = [...xs].sort((a, b) => a - b);
  const m = Math.floor(v.length / 2);
  return v.length % 2 ? v[m] : (v[m - 1] + v[m]) / 2;
}
const round = (x) => (x === undefined ? undefined : Math.round(x * 10) / 10);

function summarise(runs) {
  const walls = runs.map((r) => r.wallMs);
  const mid = median(walls);
  const rep = runs.reduce((best, r) => (Math.abs(r.wallMs - mid) < Math.abs(best.wallMs - mid) ? r : best), runs[0]);
  const phases = {};
  for (const k of Object.keys(rep.phases ?? {})) phases[k] = round(median(runs.map((r) => r.phases?.[k] ?? 0)));
  const emuCpu = runs.map((r) => r.emulatorCpuMs).filter((x) => x !== undefined);
  return {
    wallMs: round(mid),
    minWallMs: round(Math.min(...walls)),
    maxWallMs: round(Math.max(...walls)),
    runs: walls.map(round),
    cpuMs: round(median(runs.map((r) => r.cpuMs))),
    cpuRuns: runs.map((r) => round(r.cpuMs)),
    maxRssMB: round(Math.max(...runs.map((r) => r.maxRssKB)) / 1024),
    phases,
    requests: rep.requests,
    totalRequests: rep.totalRequests,
    emulatorCpuMs: emuCpu.length ? round(median(emuCpu)) : undefined,
  };
}

// ------------------------------------------------------------------ main
const started = performance.now();
const results = [];
const log = (s) => process.stderr.write(`${s}\n`);
log(
  `kms-sync bench${quick ? ' (quick)' : ''}: whole processes, latency ${latencyMs} ms/request, --parallelism ${parallelism}, ${os.cpus().length} cores, load average ${os
    .loadavg()
    .map((x) => x.toFixed(1))
    .join(' ')}, node ${process.version}`,
);

let emulator = null;
try {
  for (const s of scenarios) {
    const t0 = performance.now();
    const needsEmulator = ['noop', 'update', 'create', 'rotate', 'cdktf', 'terraform'].includes(s.mode);
    emulator = needsEmulator ? await startEmulatorChild() : null;
    const r = await modes[s.mode](s, emulator);
    if (r.fleetRuns) {
      // kmsSync: the first fleet's figures (the table shows each).
      results.push({
        id: s.id,
        key: s.key,
        title: s.title,
        mode: s.mode,
        runs: s.runs,
        kmsSync: r.fleetRuns[0].kmsSync,
        fleets: r.fleetRuns,
        scenarioSeconds: round((performance.now() - t0) / 1000),
      });
      continue;
    }
    if (r.skipped) {
      results.push({ id: s.id, key: s.key, title: s.title, mode: s.mode, skipped: r.skipped });
      log(`  ${s.id}. ${s.title}: skipped: ${r.skipped}`);
      continue;
    }
    const kms = summarise(r.runs);
    let baseline;
    if (s.baseline && emulator) {
      const b = await runWorker(emulator, {
        ...s.env,
        url: emulator.url,
        apiKey: API_KEY,
        parallelism,
        mode: 'baseline',
        run: 0,
        sample: s.baseline.sample,
        changeEvery: s.env.changeEvery,
      });
      baseline = {
        wallMs: round(b.wallMs),
        totalRequests: b.totalRequests,
        extrapolated: b.extrapolated,
        sampled: b.sampled,
        resources: b.resources,
      };
    }
    if (emulator) await emulator.stop();
    emulator = null;
    const limit = s.env ? limitRequests(s) : undefined;
    const t = s.targets;
    const meets = quick
      ? {}
      : {
          ...(t.maxWallMs !== undefined ? { wall: kms.wallMs < t.maxWallMs } : {}),
          ...(t.maxRequests !== undefined ? { requests: kms.totalRequests <= t.maxRequests } : {}),
          ...(t.maxRssMB !== undefined ? { rss: kms.maxRssMB < t.maxRssMB } : {}),
        };
    const entry = {
      id: s.id,
      key: s.key,
      title: s.title,
      mode: s.mode,
      sizes: s.env,
      runs: s.runs,
      warmups,
      targets: t,
      meetsTargets: meets,
      ...(limit !== undefined ? { limit: { requests: limit } } : {}),
      kmsSync: kms,
      ...(r.extra ?? {}),
      ...(baseline
        ? {
            baseline,
            ratio: {
              time: Math.round((kms.wallMs / baseline.wallMs) * 1e4) / 1e4,
              requests: Math.round((kms.totalRequests / baseline.totalRequests) * 1e4) / 1e4,
            },
          }
        : {}),
      scenarioSeconds: round((performance.now() - t0) / 1000),
    };
    results.push(entry);
    log(
      `  ${s.id}. ${s.title}: ${fmtMs(kms.wallMs)} median whole process, ${kms.totalRequests} requests, ${kms.maxRssMB} MB RSS (${entry.scenarioSeconds} s)`,
    );
  }
} catch (e) {
  if (emulator) await emulator.stop().catch(() => undefined);
  log(`bench failed: ${e instanceof Error ? e.message : String(e)}`);
  rmSync(tmpRoot, { recursive: true, force: true });
  process.exit(1);
}
rmSync(tmpRoot, { recursive: true, force: true });

const cpu = os.cpus();
const report = {
  date: new Date().toISOString(),
  mode: quick ? 'quick' : 'full',
  machine: {
    cores: cpu.length,
    cpu: cpu[0]?.model,
    memoryGB: round(os.totalmem() / 2 ** 30),
    platform: `${os.platform()} ${os.release()}`,
    node: process.version,
    loadAverage: os.loadavg(),
  },
  latencyMs,
  parallelism,
  totalSeconds: round((performance.now() - started) / 1000),
  scenarios: results,
};
writeFileSync(out, `${JSON.stringify(report, null, 2)}\n`);

// ------------------------------------------------------------------ table
function fmtMs(ms) {
  return ms === undefined ? '–' : ms >= 1000 ? `${(ms / 1000).toFixed(2)} s` : `${Math.round(ms)} ms`;
}
function table(rows) {
  const widths = rows[0].map((_, c) => Math.max(...rows.map((r) => String(r[c]).length)));
  const line = (r) => `| ${r.map((x, c) => String(x).padEnd(widths[c])).join(' | ')} |`;
  return [line(rows[0]), `|${widths.map((w) => '-'.repeat(w + 2)).join('|')}|`, ...rows.slice(1).map(line)].join('\n');
}
const ok = (v) => (v === undefined ? '' : v ? ' ✓' : ' ✗');
const PHASES = [
  ['start-up', (p) => (p.startupMs ?? 0) + (p.commandImportMs ?? 0)],
  ['config', (p) => p.configMs],
  ['names', (p) => p.namesMs],
  ['read', (p) => p.readMs],
  ['plan', (p) => p.planMs],
  ['rest', (p) => p.otherMs],
];
const rows = [
  [
    '#',
    'scenario',
    'target',
    'wall, whole process (median)',
    'phases: ' + PHASES.map(([n]) => n).join(' / '),
    'requests (limit)',
    'peak RSS',
    'CPU kms-sync / emulator',
    'baseline wall / requests',
    'ratio time, requests',
  ],
];
for (const r of results) {
  if (r.fleets) {
    for (const f of r.fleets) {
      const k = f.kmsSync;
      rows.push([
        r.id,
        `${r.mode === 'fleet' && f.apply ? `apply (${heldWhole(f) ? 'plan held whole' : 'environment by environment'}), ${f.clients.toLocaleString('en')} client creates` : `no-op plan, ${f.clients.toLocaleString('en')} clients`} over ${f.projects * f.envsPerProject} environment(s) (${Math.round(f.configBytes / 1e6)} MB YAML)`,
        f.target
          ? `< ${fmtMs(f.target.maxWallMs)}, < ${f.target.maxRssMB} MB${k.wallMs <= f.target.maxWallMs && k.maxRssMB <= f.target.maxRssMB ? ' ✓' : ' ✗'}`
          : '',
        fmtMs(k.wallMs),
        PHASES.map(([, fn]) => fmtMs(fn(k.phases))).join(' / '),
        `${k.totalRequests}`,
        `${k.maxRssMB} MB (emulator ${f.emulatorMaxRssMB} MB)`,
        `${fmtMs(k.cpuMs)} / ${fmtMs(k.emulatorCpuMs)}`,
        '–',
        '–',
      ]);
    }
    continue;
  }
  if (r.skipped) {
    rows.push([r.id, r.title, '', `skipped: ${r.skipped}`, '', '', '', '', '', '']);
    continue;
  }
  const k = r.kmsSync;
  const target = [
    r.targets.maxWallMs !== undefined ? `< ${fmtMs(r.targets.maxWallMs)}` : '',
    r.targets.maxRequests ? `≤ ${r.targets.maxRequests} req` : '',
    r.targets.maxRssMB ? `< ${r.targets.maxRssMB} MB` : '',
    r.targets.maxRatio ? `≤ ${r.targets.maxRatio}× terraform_data` : '',
  ]
    .filter(Boolean)
    .join(', ');
  const wall =
    r.mode === 'startup'
      ? `${fmtMs(r.versionMs)} / ${fmtMs(r.helpMs)}${ok(r.meetsTargets.wall)}`
      : r.mode === 'cdktf'
        ? `${fmtMs(k.wallMs)} (synth alone ${fmtMs(r.synthMs)}, plan of cdktf.out ${fmtMs(r.planFromOutput.wallMs)})`
        : r.mode === 'terraform'
          ? `${fmtMs(k.wallMs)}, terraform_data ${fmtMs(r.terraformData.wallMs)}: ${r.ratio.time.toFixed(2)}×${ok(quick ? undefined : r.meetsRatio)}`
          : `${fmtMs(k.wallMs)}${ok(r.meetsTargets.wall)}`;
  rows.push([
    r.id,
    r.title,
    target,
    wall,
    r.mode === 'diff'
      ? `plan ${fmtMs(k.phases.planMs)} (in-process)`
      : PHASES.map(([, f]) => fmtMs(f(k.phases))).join(' / '),
    r.mode === 'diff' || r.mode === 'startup' || r.mode === 'validate'
      ? '0'
      : `${k.totalRequests}${r.limit ? ` (${r.limit.requests})` : ''}${ok(r.meetsTargets.requests)}`,
    `${k.maxRssMB} MB${ok(r.meetsTargets.rss)}`,
    `${fmtMs(k.cpuMs)} / ${fmtMs(k.emulatorCpuMs)}`,
    r.baseline ? `${r.baseline.extrapolated ? '≈' : ''}${fmtMs(r.baseline.wallMs)} / ${r.baseline.totalRequests}` : '–',
    r.ratio?.requests !== undefined
      ? `${r.ratio.time.toFixed(3)}, ${r.ratio.requests.toFixed(4)}`
      : r.ratio
        ? `${r.ratio.time.toFixed(3)} (time)`
        : '–',
  ]);
}
if (opts.json) process.stdout.write(`${JSON.stringify(report, null, 2)}\n`);
else {
  process.stdout.write(`\n${table(rows)}\n\n`);
  process.stdout.write(
    `Whole process = spawn to exit of \`node dist/bin/kms-sync.js …\`; phases from the process itself (KMS_SYNC_PROFILE). latency ${latencyMs} ms per request, --parallelism ${parallelism}, ${report.machine.cores} cores (${report.machine.cpu}), load average at start ${os.loadavg()[0].toFixed(1)}, node ${process.version}; medians of ${quick ? 1 : 'several'} runs after ${warmups} warm-up; ≈ = baseline scaled from a sample; ✓/✗ = target met. Total ${report.totalSeconds} s. Results: ${path.relative(process.cwd(), out)}\n`,
  );
}
