// The crash campaign (issue 10): mutate a desired state, run `kms-sync apply`/`rotate` as a real
// process against the emulator (its own process) with faults, kill it (SIGKILL or SIGINT) at
// random moments and deliberately inside the windows that matter — after the service committed a
// key but before the response is read, after the journal fsync but before the store write, after
// the store write but before the journal is cleared — then re-run `apply` until it converges and
// check, independently of kms-sync's code (sops-age decrypts the store, the service validates
// every raw value), that no live key lost its raw value, no orphan is live, the journal is empty,
// no raw key was printed and the next plan is empty.
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, renameSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { decryptSops } from 'sops-age';

const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
const cli = path.join(repoRoot, 'dist', 'bin', 'kms-sync.js');
const PROJECT_KEY = 'sk_test_crashcampaign0000000000';
const ENV = 'crash-production';
const RAW_KEY = /kmsc_[A-Za-z0-9_-]{20,}/;

export type Window = 'random-kill' | 'commit-window' | 'journal-window' | 'store-window' | 'sigint' | 'double-sigint' | 'dropped-responses' | 'store-fails';
const WINDOWS: Window[] = ['random-kill', 'commit-window', 'journal-window', 'store-window', 'sigint', 'double-sigint', 'dropped-responses', 'store-fails'];

export interface CampaignOptions {
  seed: number;
  iterations: number;
  log?: (line: string) => void;
}

export interface CampaignReport {
  seed: number;
  iterations: number;
  byWindow: Record<string, number>;
  kills: number;
  keysIssued: number;
  keysLost: number;
  orphansLive: number;
  failures: string[];
}

/** mulberry32: a small seeded generator, so a failing run can be replayed from its seed. */
function rng(seed: number) {
  let a = seed >>> 0;
  const next = () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  return { next, int: (lo: number, hi: number) => lo + Math.floor(next() * (hi - lo + 1)), pick: <T>(xs: readonly T[]) => xs[Math.floor(next() * xs.length)]! };
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

interface DesiredKey { name: string; overlap: boolean }
interface DesiredClient { name: string; keys: DesiredKey[] }

function configYaml(clients: DesiredClient[]): string {
  const lines = [
    'apiVersion: kms-sync/v1', 'projects:', '  - slug: crash', '    name: Crash', '    environments:', '      - type: production',
    '        url: https://api.crash.example', '        templates:', '          - { name: std, rateLimitDay: 1000000, maxClients: 10000 }',
    '        endpoints:', '          - { method: GET, path: /v1/orders, name: Orders }', '        clients:',
  ];
  if (clients.length === 0) lines[lines.length - 1] = '        clients: []';
  for (const c of clients) {
    lines.push(`          - name: ${c.name}`, '            template: std', '            keys:');
    for (const k of c.keys) lines.push(`              - { name: ${k.name}${k.overlap ? ', rotation: { overlap: 1h }' : ''} }`);
  }
  return lines.join('\n') + '\n';
}

class Emulator {
  url = '';
  private child?: ChildProcess;
  private readonly dataFile: string;
  constructor(dataFile: string) {
    this.dataFile = dataFile;
  }
  async start() {
    // The control routes (faults, counts) are off by default in newer emulators: ask for them.
    const help = await new Promise<string>((resolve) => {
      const h = spawn(process.execPath, [cli, 'emulator', '--help'], { stdio: ['ignore', 'pipe', 'ignore'] });
      let t = '';
      h.stdout!.on('data', (d: Buffer) => { t += d.toString(); });
      h.on('exit', () => resolve(t));
    });
    const control = /--control\b/.test(help) ? ['--control'] : [];
    this.child = spawn(process.execPath, [cli, 'emulator', '--api-key', PROJECT_KEY, '--port', '0', '--data', this.dataFile, ...control], { stdio: ['ignore', 'pipe', 'pipe'] });
    this.url = await new Promise<string>((resolve, reject) => {
      let buf = '';
      this.child!.stdout!.on('data', (d: Buffer) => {
        buf += d.toString();
        const m = /listening on (\S+)/.exec(buf);
        if (m) resolve(m[1]!);
      });
      this.child!.on('exit', (code) => reject(new Error(`emulator exited (${code})`)));
    });
  }
  stop() {
    this.child?.kill('SIGKILL');
  }
  async call(method: string, p: string, body?: unknown): Promise<any> {
    const res = await fetch(`${this.url}${p}`, {
      method, headers: { 'x-api-key': PROJECT_KEY, ...(body !== undefined ? { 'content-type': 'application/json' } : {}) },
      ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
    });
    const text = await res.text();
    return text ? JSON.parse(text) : undefined;
  }
  async counts(): Promise<Record<string, number>> {
    const origin = new URL(this.url).origin;
    const res = await fetch(`${origin}/__emulator/counts`, { headers: { 'x-api-key': PROJECT_KEY } });
    const j = (await res.json()) as { counts?: Record<string, number> } & Record<string, number>;
    return j.counts ?? j;
  }
  async faults(rules: unknown[] | null) {
    const origin = new URL(this.url).origin;
    await fetch(`${origin}/__emulator/faults`, {
      method: rules ? 'POST' : 'DELETE', headers: { 'x-api-key': PROJECT_KEY, 'content-type': 'application/json' },
      ...(rules ? { body: JSON.stringify({ rules }) } : {}),
    });
  }
  async clients(): Promise<any[]> {
    const out: any[] = [];
    for (let page = 1; ; page++) {
      const r = await this.call('GET', `/client?project_env=${ENV}&page=${page}&limit=100`);
      if (!r?.data) return out;
      out.push(...r.data);
      if (page >= (r.pagination?.pages ?? 1)) return out;
    }
  }
}

interface Proc { child: ChildProcess; exit: Promise<number | null>; output: () => string }

export async function runCampaign(o: CampaignOptions): Promise<CampaignReport> {
  const log = o.log ?? (() => {});
  const r = rng(o.seed);
  const dir = mkdtempSync(path.join(tmpdir(), 'kms-sync-crash-'));
  const cfgDir = path.join(dir, 'config');
  mkdirSync(cfgDir, { recursive: true });
  const keyFile = path.join(dir, 'age-keys.txt');
  const storeFile = path.join(cfgDir, '.kms-sync', 'secrets.sops.yaml');
  const journalFile = path.join(cfgDir, '.kms-sync', 'journal');
  const emu = new Emulator(path.join(dir, 'emulator.json'));
  await emu.start();
  const env = {
    PATH: process.env.PATH, HOME: dir, NO_COLOR: '1', KMS_API_URL: emu.url, KMS_API_KEY: PROJECT_KEY, SOPS_AGE_KEY_FILE: keyFile,
    KMS_SYNC_ALLOW_LOCAL_STORE: '1',
  };
  const report: CampaignReport = { seed: o.seed, iterations: o.iterations, byWindow: {}, kills: 0, keysIssued: 0, keysLost: 0, orphansLive: 0, failures: [] };
  const outputs: string[] = [];
  const everStored = new Map<string, string>(); // keyPrefix → raw value, for every value the store ever held
  const seenKeyIds = new Set<string>();

  const run = (args: string[], extraEnv: Record<string, string> = {}): Proc => {
    const child = spawn(process.execPath, [cli, ...args], { cwd: dir, env: { ...env, ...extraEnv }, stdio: ['ignore', 'pipe', 'pipe'] });
    let text = '';
    child.stdout!.on('data', (d: Buffer) => { text += d.toString(); });
    child.stderr!.on('data', (d: Buffer) => { text += d.toString(); });
    const exit = new Promise<number | null>((resolve) => child.on('exit', (code) => { outputs.push(text); resolve(code); }));
    return { child, exit, output: () => text };
  };
  const readStore = async (): Promise<Record<string, string>> => {
    if (!existsSync(storeFile) || statSync(storeFile).isDirectory()) return {};
    const identity = readFileSync(keyFile, 'utf8').split('\n').find((l) => l.startsWith('AGE-SECRET-KEY-1'))!;
    const decoded = (await decryptSops(readFileSync(storeFile, 'utf8'), { secretKey: identity, fileType: 'yaml' })) as { secrets?: Record<string, { value: string }> };
    const out: Record<string, string> = {};
    for (const [name, s] of Object.entries(decoded.secrets ?? {})) {
      out[name] = s.value;
      everStored.set(s.value.slice(0, 12), s.value);
    }
    return out;
  };
  const observe = async () => { for (const c of await emu.clients()) for (const k of c.keys ?? []) seenKeyIds.add(k.id); };
  const waitFor = async (cond: () => Promise<boolean> | boolean, ms: number) => {
    const end = Date.now() + ms;
    while (Date.now() < end) {
      if (await cond()) return true;
      await sleep(10);
    }
    return false;
  };
  const routeCount = async (route: string) => (await emu.counts())[route] ?? 0;
  const fileSize = (f: string) => { try { return statSync(f).size; } catch { return -1; } };
  const fileMtime = (f: string) => { try { return statSync(f).mtimeMs; } catch { return -1; } };

  let clients: DesiredClient[] = [];
  let serial = 0;
  const mutate = () => {
    const steps = r.int(1, 3);
    for (let i = 0; i < steps; i++) {
      const what = clients.length < 3 ? 'add-client' : r.pick(['add-client', 'add-client', 'remove-client', 'add-key', 'add-key', 'remove-key', 'rename-client', 'toggle-overlap'] as const);
      if (what === 'add-client') {
        const n = r.int(1, 4);
        for (let j = 0; j < n; j++) clients.push({ name: `c${++serial}`, keys: Array.from({ length: r.int(1, 2) }, (_, x) => ({ name: `k${x + 1}`, overlap: r.next() < 0.3 })) });
      } else if (what === 'remove-client') clients.splice(r.int(0, clients.length - 1), 1);
      else if (what === 'rename-client') r.pick(clients).name = `c${++serial}`;
      else {
        const c = r.pick(clients);
        if (what === 'add-key') c.keys.push({ name: `k${c.keys.length + 1 + r.int(0, 5)}`, overlap: r.next() < 0.4 });
        else if (what === 'remove-key' && c.keys.length > 1) c.keys.splice(r.int(0, c.keys.length - 1), 1);
        else if (what === 'toggle-overlap') { const k = r.pick(c.keys); k.overlap = !k.overlap; }
      }
      // unique key names per client
      for (const c of clients) c.keys = c.keys.filter((k, i, all) => all.findIndex((x) => x.name === k.name) === i);
    }
    writeFileSync(path.join(cfgDir, 'kms-sync.yaml'), configYaml(clients));
  };

  const converge = async (): Promise<boolean> => {
    for (let attempt = 1; attempt <= 5; attempt++) {
      const p = run(['apply', '-f', 'config', '--auto-approve']);
      const code = await p.exit;
      if (code === 0) return true;
      log(`  converge attempt ${attempt} exited ${code}: ${p.output().split('\n').filter((l) => /FAILED|Error|Reason/.test(l)).slice(0, 3).join(' | ')}`);
    }
    return false;
  };

  try {
    mutate();
    if (!(await converge())) report.failures.push('initial apply did not converge');
    await readStore();
    for (let it = 1; it <= o.iterations; it++) {
      mutate();
      const window = r.pick(WINDOWS);
      report.byWindow[window] = (report.byWindow[window] ?? 0) + 1;
      // Rotations too: some iterations rotate a random key instead of applying.
      const rotate = clients.length > 0 && r.next() < 0.25;
      const target = rotate ? r.pick(clients) : undefined;
      const args = rotate
        ? ['rotate', '-f', 'config', '--key', `key.${ENV}/${target!.name}/${r.pick(target!.keys).name}`, '--auto-approve', ...(r.next() < 0.5 ? ['--revoke-old'] : [])]
        : ['apply', '-f', 'config', '--auto-approve'];
      const issuingRoute = rotate || r.next() < 0.5 ? 'PUT /client/{client_uuid}' : 'POST /client';
      const [method, route] = issuingRoute.split(' ') as [string, string];
      let extraEnv: Record<string, string> = {};
      if (window === 'journal-window') extraEnv = { KMS_SYNC_TEST_PAUSE: 'after-journal:600' };
      if (window === 'store-window') extraEnv = { KMS_SYNC_TEST_PAUSE: 'after-store:600' };
      if (window === 'commit-window' || window === 'store-fails') await emu.faults([{ method, route, mode: 'delay-after-commit', delayMs: 600, times: 3 }]);
      if (window === 'dropped-responses') {
        await emu.faults([
          { method, route, mode: 'drop-after-commit', times: r.int(1, 2) },
          { method: 'GET', route: '/client', mode: '429', times: 1, retryAfterSeconds: 0 },
          { method: 'PUT', route: '/client/{client_uuid}', mode: 'error', status: 503, times: 1 },
        ]);
      }
      const before = await routeCount(issuingRoute);
      const p = run(args, extraEnv);
      let killed = false;
      let storeSwapped = false;
      const kill = (sig: NodeJS.Signals) => { if (p.child.exitCode === null) { p.child.kill(sig); if (sig === 'SIGKILL') killed = true; } };
      if (window === 'random-kill') {
        await Promise.race([sleep(r.int(50, 2500)), p.exit]);
        kill('SIGKILL');
      } else if (window === 'commit-window') {
        if (await waitFor(async () => (await routeCount(issuingRoute)) > before || p.child.exitCode !== null, 8000)) {
          await sleep(r.int(0, 450));
          kill('SIGKILL');
        }
      } else if (window === 'journal-window' || window === 'store-window') {
        const file = window === 'journal-window' ? journalFile : storeFile;
        const start = window === 'journal-window' ? fileSize(file) : fileMtime(file);
        if (await waitFor(async () => (await routeCount(issuingRoute)) > before || p.child.exitCode !== null, 8000)) {
          if (await waitFor(() => (window === 'journal-window' ? fileSize(file) : fileMtime(file)) !== start || p.child.exitCode !== null, 8000)) {
            await sleep(r.int(0, 450));
            kill('SIGKILL');
          }
        }
      } else if (window === 'sigint' || window === 'double-sigint') {
        await Promise.race([sleep(r.int(50, 2000)), p.exit]);
        kill('SIGINT');
        if (window === 'double-sigint') { await Promise.race([sleep(r.int(5, 300)), p.exit]); kill('SIGINT'); }
        const finished = await Promise.race([p.exit.then(() => true), sleep(30_000).then(() => false)]);
        if (!finished) { report.failures.push(`iteration ${it}: apply did not exit within 30 s of SIGINT`); kill('SIGKILL'); }
      } else if (window === 'store-fails') {
        if (await waitFor(async () => (await routeCount(issuingRoute)) > before || p.child.exitCode !== null, 8000) && existsSync(storeFile)) {
          renameSync(storeFile, `${storeFile}.aside`);
          mkdirSync(storeFile);
          writeFileSync(path.join(storeFile, 'x'), 'not a store');
          storeSwapped = true;
        }
      }
      const code = await p.exit;
      if (killed) report.kills++;
      if (storeSwapped) {
        rmSync(storeFile, { recursive: true, force: true });
        renameSync(`${storeFile}.aside`, storeFile);
      }
      await emu.faults(null);
      if (!killed && code !== null && ![0, 1, 3].includes(code)) report.failures.push(`iteration ${it} (${window}): exit code ${code}`);
      await observe();
      await readStore();
      if (!(await converge())) report.failures.push(`iteration ${it} (${window}): apply did not converge`);
      const problems = await verify();
      report.failures.push(...problems.map((x) => `iteration ${it} (${window}, ${args[0]}): ${x}`));
      log(`iteration ${it}/${o.iterations} ${window} ${args[0]}${killed ? ' killed' : ` exit ${code}`}: ${problems.length ? problems.join('; ') : 'ok'}`);
    }
  } finally {
    emu.stop();
  }
  report.keysIssued = seenKeyIds.size;
  for (const text of outputs) if (RAW_KEY.test(text) || text.includes('AGE-SECRET-KEY-1')) report.failures.push(`a raw key or identity was printed: ${RAW_KEY.exec(text)?.[0].slice(0, 9)}…`);
  rmSync(dir, { recursive: true, force: true });
  return report;

  async function verify(): Promise<string[]> {
    const problems: string[] = [];
    if (existsSync(journalFile) && statSync(journalFile).size > 0) problems.push(`journal not empty (${statSync(journalFile).size} bytes)`);
    const stored = await readStore();
    const live = await emu.clients();
    await observe();
    for (const c of live) {
      const names = new Set((c.keys ?? []).map((k: any) => k.name));
      for (const name of names) {
        const gens = (c.keys as any[]).filter((k) => k.name === name).sort((a, b) => (a.createdAt < b.createdAt ? -1 : 1));
        for (const [i, k] of gens.entries()) {
          const raw = everStored.get(k.keyPrefix);
          if (!raw) {
            report.keysLost++;
            problems.push(`LOST: live key ${c.name}/${k.name} (${k.id}) has no raw value anywhere`);
            continue;
          }
          if (i === gens.length - 1) {
            const current = stored[`${ENV}/${c.name}/${name}`];
            if (current !== raw) problems.push(`store holds another value than the current key ${c.name}/${name}`);
            const v = await emu.call('POST', `/client/${c.id}?project_env=${ENV}&method_path=${encodeURIComponent('GET:/v1/orders')}`, { name, headers: { 'x-api-key': raw } });
            if (!v?.success) problems.push(`stored key of ${c.name}/${name} does not validate`);
          }
        }
      }
    }
    const plan = run(['plan', '-f', 'config', '--detailed-exitcode']);
    const code = await plan.exit;
    if (code !== 0) problems.push(`plan after convergence exited ${code}: ${plan.output().slice(0, 300)}`);
    return problems;
  }
}
