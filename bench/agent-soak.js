// The agent's soak (issue 29): `kms-sync agent` as a real process runs 1,000 reconcile cycles
// against the emulator (its own process) and a bare git repository on disk, and its resident
// memory and open file descriptors are read from /proc at the start (after a warm-up) and at the
// end. Cycles are triggered back to back through the signed GitHub webhook, so the run takes
// minutes, not 1,000 intervals; every 50th cycle the test changes a client by hand and the agent,
// in self-heal mode, writes it back (the apply path, not only the read path, is exercised).
//
//   node bench/agent-soak.js [--cycles 1000] [--clients 20] [--json]
//
// Figures are printed (and go to docs/agent.md), never asserted: this is a bench, not a test.
import { execFileSync, spawn } from 'node:child_process';
import { createHmac } from 'node:crypto';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
const cli = path.join(here, '..', 'dist', 'bin', 'kms-sync.js');
const arg = (name, dflt) => {
  const i = process.argv.indexOf(name);
  return i > 0 ? Number(process.argv[i + 1]) : dflt;
};
const CYCLES = arg('--cycles', 1000);
const CLIENTS = arg('--clients', 20);
const API_KEY = 'sk_test_agentsoak000000000001';
const SECRET = 'agent-soak-webhook-secret';
const ENV = 'soak-production';

const root = mkdtempSync(path.join(os.tmpdir(), 'kms-sync-agent-soak-'));
const children = [];
const cleanup = () => {
  for (const c of children) c.kill('SIGKILL');
  rmSync(root, { recursive: true, force: true });
};
process.on('exit', cleanup);

function git(cwd, args) {
  return execFileSync('git', args, {
    cwd,
    env: { PATH: process.env.PATH, HOME: root, LC_ALL: 'C' },
    encoding: 'utf8',
  }).trim();
}

function config() {
  const lines = [
    'apiVersion: kms-sync/v1',
    'owner: agent-soak',
    'projects:',
    '  - slug: soak',
    '    name: Soak',
    '    environments:',
    '      - type: production',
    '        url: https://api.soak.example',
    '        templates:',
    '          - { name: std, rateLimitDay: 100000, maxClients: 1000 }',
    '        clients:',
  ];
  for (let i = 0; i < CLIENTS; i++)
    lines.push(
      `          - name: client${i}`,
      '            template: std',
      '            ipWhitelist: []',
      '            keys:',
      '              - { name: primary }',
    );
  return `${lines.join('\n')}\n`;
}

/** Starts a process and resolves with the first match of `re` in its output. */
function start(args, env, re) {
  const child = spawn(process.execPath, [cli, ...args], { cwd: root, env, stdio: ['ignore', 'pipe', 'pipe'] });
  children.push(child);
  let out = '';
  return new Promise((resolve, reject) => {
    const on = (d) => {
      out += d.toString();
      const m = re.exec(out);
      if (m) resolve({ child, url: m[1] });
    };
    child.stdout.on('data', on);
    child.stderr.on('data', on);
    child.on('exit', (code) => reject(new Error(`exited ${code}:\n${out}`)));
  });
}

/** RSS and open fds from /proc; the V8 heap in use from the agent's own metrics (Node's process metrics). */
async function sample(pid, url) {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const kb = (k) => Number(new RegExp(`^${k}:\\s+(\\d+)`, 'm').exec(status)?.[1] ?? 0);
  const text = await (await fetch(`${url}/metrics`)).text();
  const heap = Number(/^nodejs_heap_size_used_bytes (\S+)/m.exec(text)?.[1] ?? NaN);
  return {
    rssMiB: +(kb('VmRSS') / 1024).toFixed(1),
    heapMiB: +(heap / 1048576).toFixed(1),
    fds: readdirSync(`/proc/${pid}/fd`).length,
  };
}

const reconciles = async (url) => {
  const text = await (await fetch(`${url}/metrics`)).text();
  return Object.fromEntries(
    [...text.matchAll(/^kms_sync_reconcile_total\{result="(\w+)"\} (\d+)/gm)].map((m) => [m[1], Number(m[2])]),
  );
};
const total = (r) => Object.values(r).reduce((a, b) => a + b, 0);

const emu = await start(
  ['emulator', '--port', '0', '--data', path.join(root, 'emulator.json')],
  { PATH: process.env.PATH, HOME: root, KMS_EMULATOR_API_KEY: API_KEY },
  /listening on (\S+)/,
);
const origin = path.join(root, 'origin.git');
const work = path.join(root, 'work');
git(root, ['init', '-q', '--bare', '-b', 'main', origin]);
git(root, ['init', '-q', '-b', 'main', work]);
mkdirSync(path.join(work, 'kms'));
writeFileSync(path.join(work, 'kms', 'kms-sync.yaml'), config());
git(work, ['add', '.']);
git(work, ['-c', 'user.name=Bench', '-c', 'user.email=bench@example.com', 'commit', '-q', '-m', 'soak']);
git(work, ['push', '-q', origin, 'HEAD:main']);

const agent = await start(
  [
    'agent',
    '--repo',
    `file://${origin}`,
    '--path',
    'kms',
    '--interval',
    '1h',
    '--mode',
    'self-heal',
    '--listen',
    '127.0.0.1:0',
    '--state-dir',
    path.join(root, 'state'),
    '--log-format',
    'json',
  ],
  {
    PATH: process.env.PATH,
    HOME: root,
    KMS_API_URL: emu.url,
    KMS_API_KEY: API_KEY,
    KMS_SYNC_GITHUB_WEBHOOK_SECRET: SECRET,
  },
  /listening on (http:\/\/[^\s"]+)/,
);
const pid = agent.child.pid;
// Each delivery is a new one (the agent ignores a body or delivery id it has seen).
let deliveries = 0;
const call = (p, init) =>
  fetch(`${emu.url}${p}`, { ...init, headers: { 'x-api-key': API_KEY, 'content-type': 'application/json' } }).then(
    (r) => r.json(),
  );

async function cycle() {
  const before = total(await reconciles(agent.url));
  const body = JSON.stringify({ ref: 'refs/heads/main', delivery: ++deliveries });
  const signature = `sha256=${createHmac('sha256', SECRET).update(body).digest('hex')}`;
  await fetch(`${agent.url}/hooks/github`, {
    method: 'POST',
    body,
    headers: { 'x-hub-signature-256': signature, 'x-github-event': 'push', 'x-github-delivery': `soak-${deliveries}` },
  });
  for (;;) {
    if (total(await reconciles(agent.url)) > before) return;
    await new Promise((r) => setTimeout(r, 5));
  }
}

const WARMUP = 20;
for (let i = 0; i < WARMUP; i++) await cycle();
const t0 = Date.now();
const first = await sample(pid, agent.url);
const samples = [{ cycle: 0, ...first }];
let drifts = 0;
for (let i = 1; i <= CYCLES; i++) {
  if (i % 50 === 0) {
    const clients = (await call(`/client?project_env=${ENV}&limit=100`)).data;
    const c = clients[i % clients.length];
    await call(`/client/${c.id}?project_env=${ENV}`, {
      method: 'PUT',
      body: JSON.stringify({ ipWhitelist: ['192.0.2.1/32'] }),
    });
    drifts++;
  }
  await cycle();
  if (i % 100 === 0) samples.push({ cycle: i, ...(await sample(pid, agent.url)) });
}
const last = await sample(pid, agent.url);
const results = await reconciles(agent.url);
const ms = Date.now() - t0;
const metricsText = await (await fetch(`${agent.url}/metrics`)).text();
const applied = [...metricsText.matchAll(/^kms_sync_operations_applied_total\{action="(\w+)"\} (\d+)/gm)]
  .map((m) => `${m[1]} ${m[2]}`)
  .join(', ');
agent.child.kill('SIGTERM');
await new Promise((r) => agent.child.once('exit', r));
const report = {
  cycles: CYCLES,
  clients: CLIENTS,
  warmup: WARMUP,
  seconds: +(ms / 1000).toFixed(1),
  msPerCycle: +(ms / CYCLES).toFixed(1),
  start: first,
  end: last,
  rssGrowthMiB: +(last.rssMiB - first.rssMiB).toFixed(1),
  heapGrowthMiB: +(last.heapMiB - first.heapMiB).toFixed(1),
  fdGrowth: last.fds - first.fds,
  results,
  handMadeDrifts: drifts,
  applied,
  samples,
  node: process.version,
};
if (process.argv.includes('--json')) console.log(JSON.stringify(report, null, 1));
else {
  console.log(
    `agent soak: ${CYCLES} reconciles (${CLIENTS} clients, self-heal, ${drifts} hand-made drifts healed) in ${report.seconds} s (${report.msPerCycle} ms each); results ${JSON.stringify(results)}; applied ${applied}`,
  );
  console.log(
    `RSS ${first.rssMiB} MiB → ${last.rssMiB} MiB (${report.rssGrowthMiB >= 0 ? '+' : ''}${report.rssGrowthMiB}; peak ${Math.max(...samples.map((x) => x.rssMiB))}), V8 heap in use ${first.heapMiB} → ${last.heapMiB} MiB, open fds ${first.fds} → ${last.fds} (${report.fdGrowth >= 0 ? '+' : ''}${report.fdGrowth})`,
  );
  console.log(
    `every 100 cycles: ${samples.map((s) => `${s.cycle}: ${s.rssMiB} MiB RSS/${s.heapMiB} MiB heap/${s.fds} fds`).join(', ')}`,
  );
}
process.exit(0);
