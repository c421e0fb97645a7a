// `npm run bench`: plan and apply at scale against the emulator over real HTTP (issue 6).
//
//   node bench/run.js [--quick] [--runs N] [--latency-ms MS] [--parallelism N] [--read-parallelism N]
//                     [--only 1,2,..] [--full-baseline] [--out FILE] [--json]
//
// The emulator runs in its own process (bench/emulator-child.js), seeded through its control
// route; every measured run of kms-sync is a fresh process (bench/worker.js) that reports wall
// time, requests by kind and peak RSS as JSON. This driver takes medians, prints a table and
// writes bench/results.json. Targets are shown, never asserted: CI only runs `--quick` to prove the
// benchmark still works.
import { fork } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { seedRequest } from './lib/fixtures.js';

const here = path.dirname(fileURLToPath(import.meta.url));
const API_KEY = 'sk_test_bench0123456789';

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
    else if (a === '--json') o.json = true;
    else if (a === '--runs') o.runs = Number(value());
    else if (a === '--latency-ms') o.latencyMs = Number(value());
    else if (a === '--parallelism') o.parallelism = Number(value());
    else if (a === '--read-parallelism') o.readParallelism = Number(value());
    else if (a === '--only') o.only = value().split(',').map(Number);
    else if (a === '--out') o.out = path.resolve(value());
    else if (a === '--help' || a === '-h') {
      process.stdout.write('usage: node bench/run.js [--quick] [--runs N] [--latency-ms MS] [--parallelism N] [--read-parallelism N] [--only 1,2,..] [--full-baseline] [--out FILE] [--json]\n');
      process.exit(0);
    } else throw new Error(`unknown option ${a}`);
  }
  return o;
}

const opts = parseArgs(process.argv.slice(2));
const quick = opts.quick;
const latencyMs = opts.latencyMs ?? (quick ? 0 : 20);
const parallelism = opts.parallelism ?? 8; // the CLI's default --parallelism
const readParallelism = opts.readParallelism; // default: the transport's (4 × parallelism)
// Quick runs (CI) never overwrite the recorded figures; bench/results.local.json is git-ignored.
const out = opts.out ?? path.join(here, quick ? 'results.local.json' : 'results.json');
const runsFor = (n) => opts.runs ?? (quick ? 1 : n);
const warmups = quick ? 0 : 1;

/** Full sizes, or tiny ones in quick mode. */
const size = (full, tiny) => (quick ? tiny : full);
const env10k = { templates: 20, clients: size(10_000, 60), keysPerClient: 2, endpoints: size(1_000, 12) };

const scenarios = [
  {
    id: 1, key: 'noop-10k', title: `No-op plan, ${env10k.clients.toLocaleString('en')} clients`, mode: 'noop', runs: runsFor(5),
    env: { project: 'noop', type: 'production', ...env10k },
    limit: 'project list + get + ⌈clients/100⌉ + ⌈endpoints/100⌉ pages',
    targets: { maxRequests: 120, maxWallMs: 1000, maxRssMB: 250 },
    baseline: { sample: undefined },
  },
  {
    id: 2, key: 'noop-100k', title: `No-op plan, ${size(100_000, 300).toLocaleString('en')} clients`, mode: 'noop', runs: runsFor(3),
    env: { project: 'big', type: 'production', templates: 20, clients: size(100_000, 300), keysPerClient: 2, endpoints: size(1_000, 12) },
    limit: 'project list + get + ⌈clients/100⌉ + ⌈endpoints/100⌉ pages',
    targets: { maxWallMs: 5000, maxRssMB: 1024 },
    baseline: { sample: opts.fullBaseline || quick ? undefined : 10_000 },
  },
  {
    id: 3, key: 'create-1k', title: `Create ${size(1_000, 20).toLocaleString('en')} clients with keys`, mode: 'create', runs: runsFor(3),
    env: { project: 'create', type: 'production', templates: 20, clients: size(1_000, 20), keysPerClient: 2, endpoints: 0 },
    limit: 'project list + get + 2 empty first pages + ⌈clients/100⌉ bulk creates',
    targets: { maxWallMs: 3000 },
  },
  {
    id: 4, key: 'update-1pct', title: `Update 1% of ${env10k.clients.toLocaleString('en')} clients`, mode: 'update', runs: runsFor(3),
    env: { project: 'upd', type: 'production', ...env10k, changeEvery: 100 },
    limit: 'pages + changed objects',
    targets: {},
    baseline: { sample: undefined },
  },
  {
    id: 5, key: 'diff-100k', title: `Diff CPU only, ${size(100_000, 1_000).toLocaleString('en')} clients (1% changed)`, mode: 'diff', runs: runsFor(3),
    env: { project: 'mem', type: 'production', templates: 20, clients: size(100_000, 1_000), keysPerClient: 2, endpoints: size(1_000, 12), changeEvery: 100 },
    limit: 'no requests',
    targets: { maxWallMs: 1000 },
  },
].filter((s) => !opts.only || opts.only.includes(s.id));

/** The request count a perfect reader needs for a seeded environment (scenarios 1, 2, 4). */
function limitRequests(s) {
  const pages = (n) => Math.max(1, Math.ceil(n / 100));
  const e = s.env;
  if (s.mode === 'noop') return 2 + pages(e.clients) + pages(e.endpoints);
  if (s.mode === 'update') return 2 + pages(e.clients) + pages(e.endpoints) + Math.ceil(e.clients / e.changeEvery);
  if (s.mode === 'create') return 4 + Math.ceil(e.clients / 100);
  return 0;
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
          usage: () => new Promise((ok) => { const id = nextId++; pending.set(id, ok); child.send({ type: 'usage', id }); }),
          stop: () => new Promise((ok) => { child.once('exit', () => ok()); child.send({ type: 'stop' }); }),
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
    method, headers: { 'content-type': 'application/json', 'x-api-key': API_KEY }, ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
  });
  if (!r.ok) throw new Error(`${method} ${route}: ${r.status} ${await r.text()}`);
  return r.json();
}

/** One measured run in a fresh process; the emulator's counts and CPU are taken around its timed section. */
function runWorker(emu, spec) {
  return new Promise((resolve, reject) => {
    const child = fork(path.join(here, 'worker.js'), [JSON.stringify(spec)], {
      stdio: ['ignore', 'pipe', 'inherit', 'ipc'], execArgv: ['--expose-gc'],
    });
    let stdout = '';
    const emuSide = {};
    child.stdout.on('data', (d) => { stdout += d; });
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
      if (!res.ok) reject(new Error(`scenario ${spec.mode} failed: ${res.error}`));
      else resolve({ ...res, emulator: { cpuMs: emuSide.cpuMs, requests: emuSide.counts } });
    });
  });
}

// ------------------------------------------------------------------ statistics
const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  const m = Math.floor(s.length / 2);
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
};

function summarise(runs) {
  const walls = runs.map((r) => r.wallMs);
  const mid = median(walls);
  const rep = runs.reduce((best, r) => (Math.abs(r.wallMs - mid) < Math.abs(best.wallMs - mid) ? r : best), runs[0]);
  const emuCpu = runs.map((r) => r.emulator?.cpuMs).filter((x) => x !== undefined);
  const phases = {};
  for (const k of Object.keys(rep.phases ?? {})) phases[k] = round(median(runs.map((r) => r.phases?.[k] ?? 0)));
  return {
    wallMs: round(mid), minWallMs: round(Math.min(...walls)), maxWallMs: round(Math.max(...walls)), runs: walls.map(round),
    cpuMs: round(median(runs.map((r) => r.cpuMs))),
    maxRssMB: round(Math.max(...runs.map((r) => r.maxRssKB)) / 1024),
    phases,
    requests: rep.requests, totalRequests: rep.totalRequests,
    emulatorRequests: rep.emulator?.requests, emulatorTotal: rep.emulator?.requests ? Object.values(rep.emulator.requests).reduce((a, b) => a + b, 0) : undefined,
    emulatorCpuMs: emuCpu.length ? round(median(emuCpu)) : undefined,
    ...(rep.measuredRequests ? { measuredRequests: rep.measuredRequests } : {}),
    ...(rep.extrapolated ? { extrapolated: true, sampled: rep.sampled, resources: rep.resources, measuredWallMs: round(rep.measuredWallMs) } : {}),
  };
}
const round = (x) => (x === undefined ? undefined : Math.round(x * 10) / 10);

// ------------------------------------------------------------------ main
const started = performance.now();
const results = [];
const log = (s) => process.stderr.write(`${s}\n`);
const readsLabel = `${readParallelism ?? 4 * parallelism} reads`;
log(`kms-sync bench${quick ? ' (quick)' : ''}: latency ${latencyMs} ms/request, kms-sync --parallelism ${parallelism} (${readsLabel}), ${os.cpus().length} cores, node ${process.version}`);

let emulatorByScenario = null;
try {
  for (const s of scenarios) {
    const t0 = performance.now();
    let emu;
    let seedMs;
    if (s.mode !== 'diff') {
      emu = emulatorByScenario = await startEmulatorChild();
      if (s.mode !== 'create') {
        const ts = performance.now();
        await control(emu, 'POST', '/seed', seedRequest(s.env));
        seedMs = performance.now() - ts;
      }
    }
    const base = { ...s.env, url: emu?.url, apiKey: API_KEY, parallelism, ...(readParallelism ? { readParallelism } : {}) };
    const runs = [];
    const total = warmups + s.runs;
    for (let i = 0; i < total; i++) {
      // Creates need an empty environment each time: a fresh project per run.
      const spec = { ...base, mode: s.mode, run: i, ...(s.mode === 'create' ? { project: `${s.env.project}${i}` } : {}) };
      const r = await runWorker(s.mode === 'diff' ? undefined : emu, spec);
      if (i >= warmups) runs.push(r);
    }
    const kms = summarise(runs);
    let baseline;
    if (s.baseline) {
      const b = await runWorker(emu, { ...base, mode: 'baseline', run: 0, sample: s.baseline.sample, changeEvery: s.env.changeEvery });
      baseline = summarise([b]);
    }
    if (emu) await emu.stop();
    emulatorByScenario = null;
    const limit = limitRequests(s);
    const t = s.targets;
    const checks = quick ? {} : {
      ...(t.maxRequests !== undefined ? { requests: kms.totalRequests <= t.maxRequests } : {}),
      ...(t.maxWallMs !== undefined ? { wall: kms.wallMs < t.maxWallMs } : {}),
      ...(t.maxRssMB !== undefined ? { rss: kms.maxRssMB < t.maxRssMB } : {}),
      ...(s.mode === 'update' ? { requests: kms.totalRequests === limit } : {}),
    };
    const entry = {
      id: s.id, key: s.key, title: s.title, mode: s.mode, sizes: s.env, runs: s.runs, warmups: s.mode === 'diff' ? 0 : warmups,
      limit: s.mode === 'diff' ? undefined : { requests: limit, rule: s.limit }, targets: s.targets, meetsTargets: checks,
      seedMs: round(seedMs), kmsSync: kms,
      ...(baseline ? {
        baseline,
        ratio: { time: round4(kms.wallMs / baseline.wallMs), requests: round4(kms.totalRequests / baseline.totalRequests) },
      } : {}),
      scenarioSeconds: round((performance.now() - t0) / 1000),
    };
    results.push(entry);
    log(`  ${s.id}. ${s.title}: ${fmtMs(kms.wallMs)} median, ${kms.totalRequests} requests, ${kms.maxRssMB} MB RSS${baseline ? `; baseline ${fmtMs(baseline.wallMs)}, ${baseline.totalRequests} requests` : ''} (${entry.scenarioSeconds} s)`);
  }
} catch (e) {
  if (emulatorByScenario) await emulatorByScenario.stop().catch(() => undefined);
  log(`bench failed: ${e instanceof Error ? e.message : String(e)}`);
  process.exit(1);
}
function round4(x) { return Math.round(x * 10_000) / 10_000; }

const cpu = os.cpus();
const report = {
  date: new Date().toISOString(),
  mode: quick ? 'quick' : 'full',
  machine: { cores: cpu.length, cpu: cpu[0]?.model, memoryGB: round(os.totalmem() / 2 ** 30), platform: `${os.platform()} ${os.release()}`, node: process.version },
  latencyMs, parallelism, readParallelism: readParallelism ?? 4 * parallelism,
  totalSeconds: round((performance.now() - started) / 1000),
  scenarios: results,
};
writeFileSync(out, `${JSON.stringify(report, null, 2)}\n`);

// ------------------------------------------------------------------ table
function fmtMs(ms) { return ms === undefined ? '–' : ms >= 1000 ? `${(ms / 1000).toFixed(2)} s` : `${Math.round(ms)} ms`; }
function table(rows) {
  const widths = rows[0].map((_, c) => Math.max(...rows.map((r) => String(r[c]).length)));
  const line = (r) => `| ${r.map((x, c) => String(x).padEnd(widths[c])).join(' | ')} |`;
  return [line(rows[0]), `|${widths.map((w) => '-'.repeat(w + 2)).join('|')}|`, ...rows.slice(1).map(line)].join('\n');
}
const ok = (v) => (v === undefined ? '' : v ? ' ✓' : ' ✗');
const rows = [['#', 'scenario', 'wall (median)', 'requests (limit)', 'peak RSS', 'CPU kms-sync / emulator', 'baseline wall', 'baseline requests', 'time ratio', 'request ratio']];
for (const r of results) {
  const k = r.kmsSync;
  rows.push([
    r.id, r.title, `${fmtMs(k.wallMs)}${ok(r.meetsTargets.wall)}`,
    r.mode === 'diff' ? '0' : `${k.totalRequests} (${r.limit.requests})${ok(r.meetsTargets.requests)}`,
    `${k.maxRssMB} MB${ok(r.meetsTargets.rss)}`,
    `${fmtMs(k.cpuMs)} / ${fmtMs(k.emulatorCpuMs)}`,
    r.baseline ? `${r.baseline.extrapolated ? '≈' : ''}${fmtMs(r.baseline.wallMs)}` : '',
    r.baseline ? String(r.baseline.totalRequests) : '',
    r.ratio ? r.ratio.time.toFixed(3) : '', r.ratio ? r.ratio.requests.toFixed(4) : '',
  ]);
}
const kinds = [['#', 'kms-sync requests by kind', 'emulator counts']];
for (const r of results) {
  if (r.mode === 'diff') continue;
  kinds.push([r.id, Object.entries(r.kmsSync.requests).map(([k, v]) => `${k} ${v}`).join(', '), String(r.kmsSync.emulatorTotal ?? '')]);
}
if (opts.json) process.stdout.write(`${JSON.stringify(report, null, 2)}\n`);
else {
  process.stdout.write(`\n${table(rows)}\n\n${table(kinds)}\n\n`);
  process.stdout.write(`latency ${latencyMs} ms per request, kms-sync --parallelism ${parallelism} (${readsLabel} in flight), baseline 10 in flight, ${report.machine.cores} cores (${report.machine.cpu}), node ${process.version}; ` +
    `medians of ${quick ? 1 : 'several'} runs; ≈ = baseline time scaled from a sample; ✓/✗ = target met. Total ${report.totalSeconds} s. Results: ${path.relative(process.cwd(), out)}\n`);
}
