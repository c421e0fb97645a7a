// Shared pieces of the crash campaign (issue 10) and its scenarios (issue 24): a seeded generator,
// the emulator as its own process, the configuration writer, processes whose output is kept (to
// prove no raw key was printed), the pipeline trace (KMS_SYNC_TEST_TRACE) that tells in which
// window a SIGKILL landed, the store read with sops-age (not kms-sync's store code) and the
// strict invariant check: every live key is wanted with its raw value held, an overlap generation
// the configuration asked for, or reported by `plan`; nothing else.
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, readlinkSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { decryptSops } from 'sops-age';
import { startProcess } from '../support/cli.js';
import { patient, waitFor } from '../support/patience.js';

export const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
export const cli = path.join(repoRoot, 'dist', 'bin', 'kms-sync.js');
export const PROVIDER_BIN = path.join(repoRoot, 'dist', 'provider-bin', 'terraform-provider-kms.js');
export const RAW_KEY = /kmsc_[A-Za-z0-9_-]{20,}/;
export const ENDPOINT = 'GET:/v1/orders';

/** mulberry32: a small seeded generator, so a failing run can be replayed from its seed. */
export function rng(seed: number) {
  let a = seed >>> 0;
  const next = () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  return {
    next,
    int: (lo: number, hi: number) => lo + Math.floor(next() * (hi - lo + 1)),
    pick: <T>(xs: readonly T[]) => xs[Math.floor(next() * xs.length)]!,
  };
}
export type Rng = ReturnType<typeof rng>;

export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

export { waitFor };

// ------------------------------------------------------------------------------- configuration
export interface DesiredKey {
  name: string;
  overlap: boolean;
}
export interface DesiredClient {
  name: string;
  keys: DesiredKey[];
}

export type MutationStep =
  | 'add-client'
  | 'remove-client'
  | 'add-key'
  | 'remove-key'
  | 'rename-client'
  | 'toggle-overlap';
const RANDOM_STEPS: readonly MutationStep[] = [
  'add-client',
  'add-client',
  'remove-client',
  'add-key',
  'add-key',
  'remove-key',
  'rename-client',
  'toggle-overlap',
];

/**
 * One change of a campaign's desired state, in place: clients added (up to `newClients` at once),
 * removed or renamed (`name()` gives a fresh client name), keys added or removed, an overlap
 * toggled. Random unless `what` is given; below 3 clients it adds one.
 */
export function mutationStep(
  r: Rng,
  clients: DesiredClient[],
  name: () => string,
  o: { what?: MutationStep; newClients?: number } = {},
): void {
  const what = o.what ?? (clients.length < 3 ? 'add-client' : r.pick(RANDOM_STEPS));
  if (what === 'add-client') {
    const n = r.int(1, o.newClients ?? 4);
    for (let j = 0; j < n; j++)
      clients.push({
        name: name(),
        keys: Array.from({ length: r.int(1, 2) }, (_, x) => ({ name: `k${x + 1}`, overlap: r.next() < 0.3 })),
      });
  } else if (what === 'remove-client') clients.splice(r.int(0, clients.length - 1), 1);
  else if (what === 'rename-client') r.pick(clients).name = name();
  else {
    const c = r.pick(clients);
    if (what === 'add-key') c.keys.push({ name: `k${c.keys.length + 1 + r.int(0, 5)}`, overlap: r.next() < 0.4 });
    else if (what === 'remove-key' && c.keys.length > 1) c.keys.splice(r.int(0, c.keys.length - 1), 1);
    else if (what === 'toggle-overlap') {
      const k = r.pick(c.keys);
      k.overlap = !k.overlap;
    }
  }
  // unique key names per client
  for (const c of clients) c.keys = c.keys.filter((k, i, all) => all.findIndex((x) => x.name === k.name) === i);
}

export function configYaml(clients: DesiredClient[], slug = 'crash'): string {
  const lines = [
    'apiVersion: kms-sync/v1',
    'projects:',
    `  - slug: ${slug}`,
    '    name: Crash',
    '    environments:',
    '      - type: production',
    `        url: https://api.${slug}.example`,
    '        templates:',
    '          - { name: std, rateLimitDay: 1000000, maxClients: 10000 }',
    '        endpoints:',
    '          - { method: GET, path: /v1/orders, name: Orders }',
    '        clients:',
  ];
  if (clients.length === 0) lines[lines.length - 1] = '        clients: []';
  for (const c of clients) {
    lines.push(`          - name: ${c.name}`, '            template: std', '            keys:');
    for (const k of c.keys)
      lines.push(`              - { name: ${k.name}${k.overlap ? ', rotation: { overlap: 1h }' : ''} }`);
  }
  return lines.join('\n') + '\n';
}

// ------------------------------------------------------------------------------------ processes
export { startProcess as spawnProc, type RunningProcess as Proc } from '../support/cli.js';

/** A kms-sync command as a real process. */
export const kmsSync = (args: string[], o: { cwd: string; env: NodeJS.ProcessEnv; sink: string[] }) =>
  startProcess(process.execPath, [cli, ...args], o);

/** The failures "a raw key or an age identity was printed", over every output kept. */
export function printedSecrets(outputs: string[]): string[] {
  const out: string[] = [];
  for (const text of outputs) {
    if (RAW_KEY.test(text)) out.push(`a raw key was printed: ${RAW_KEY.exec(text)![0].slice(0, 9)}…`);
    if (text.includes('AGE-SECRET-KEY-1')) out.push('an age identity was printed');
  }
  return out;
}

/** Processes of this user whose working directory is under `root` and whose command line contains `needle`. */
export function processesUnder(root: string, needle: string): number[] {
  const out: number[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry) || Number(entry) === process.pid) continue;
    try {
      const cwd = readlinkSync(`/proc/${entry}/cwd`);
      if (!cwd.startsWith(root)) continue;
      const cmdline = readFileSync(`/proc/${entry}/cmdline`, 'utf8');
      // a zombie has an empty command line: already gone
      if (cmdline.includes(needle)) out.push(Number(entry));
    } catch {
      // gone meanwhile, or not ours
    }
  }
  return out;
}

// -------------------------------------------------------------------------------------- emulator
export class Emulator {
  url = '';
  private child?: ChildProcess;
  private readonly dataFile: string;
  readonly apiKey: string;
  constructor(dataFile: string, apiKey: string) {
    this.dataFile = dataFile;
    this.apiKey = apiKey;
  }
  async start() {
    this.child = spawn(process.execPath, [cli, 'emulator', '--port', '0', '--data', this.dataFile, '--control'], {
      stdio: ['ignore', 'pipe', 'pipe'],
      env: { ...process.env, KMS_EMULATOR_API_KEY: this.apiKey },
    });
    this.url = await new Promise<string>((resolve, reject) => {
      let buf = '';
      this.child!.stdout!.on('data', (d: Buffer) => {
        buf += d.toString();
        const m = /listening on (\S+)/.exec(buf);
        if (m) resolve(m[1]!);
      });
      this.child!.on('exit', (code) => reject(new Error(`emulator exited (${code})`)));
    });
    return this;
  }
  stop() {
    this.child?.kill('SIGKILL');
  }
  async call(method: string, p: string, body?: unknown): Promise<any> {
    const res = await fetch(`${this.url}${p}`, {
      method,
      headers: { 'x-api-key': this.apiKey, ...(body !== undefined ? { 'content-type': 'application/json' } : {}) },
      ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
    });
    const text = await res.text();
    return text ? JSON.parse(text) : undefined;
  }
  private control(p: string, init: RequestInit = {}) {
    return fetch(`${new URL(this.url).origin}/__emulator${p}`, {
      ...init,
      headers: { 'x-api-key': this.apiKey, 'content-type': 'application/json' },
    });
  }
  async counts(): Promise<Record<string, number>> {
    const j = (await (await this.control('/counts')).json()) as { counts?: Record<string, number> } & Record<
      string,
      number
    >;
    return j.counts ?? j;
  }
  async count(route: string) {
    return (await this.counts())[route] ?? 0;
  }
  async faults(rules: unknown[] | null) {
    const res = await this.control('/faults', {
      method: rules ? 'POST' : 'DELETE',
      ...(rules ? { body: JSON.stringify({ rules }) } : {}),
    });
    if (!res.ok) throw new Error(`emulator refused faults: ${await res.text()}`);
  }
  async clients(projectEnv: string): Promise<LiveClient[]> {
    const out: LiveClient[] = [];
    for (let page = 1; ; page++) {
      const r = await this.call('GET', `/client?project_env=${projectEnv}&page=${page}&limit=100`);
      if (!r?.data) return out;
      out.push(...r.data);
      if (page >= (r.pagination?.pages ?? 1)) return out;
    }
  }
  async liveKeys(projectEnv: string): Promise<LiveKey[]> {
    return (await this.clients(projectEnv)).flatMap((c) =>
      (c.keys ?? []).map((k) => ({ ...k, client: c.name, clientId: c.id })),
    );
  }
  /** Does the service accept `raw` as the key `name` of client `clientId`? */
  async validates(projectEnv: string, clientId: string, name: string, raw: string): Promise<boolean> {
    const v = await this.call(
      'POST',
      `/client/${clientId}?project_env=${projectEnv}&method_path=${encodeURIComponent(ENDPOINT)}`,
      { name, headers: { 'x-api-key': raw } },
    );
    return v?.success === true;
  }
}

export interface LiveClient {
  id: string;
  name: string;
  keys?: { id: string; name: string; keyPrefix: string; createdAt: string; expiresAt?: string | null }[];
}
export interface LiveKey {
  id: string;
  name: string;
  keyPrefix: string;
  createdAt: string;
  expiresAt?: string | null;
  client: string;
  clientId: string;
}

/**
 * kms-sync's default overlap (plan/key-health.ts): with no overlap configured, a rotated-out key
 * expires at most this long after its replacement. Written here, not imported: the check stays
 * independent of kms-sync's code.
 */
const DEFAULT_OVERLAP_MS = 7 * 86_400_000;
/** The overlap `configYaml` writes for a key with one (`rotation: { overlap: 1h }`). */
const CONFIG_OVERLAP_MS = 3_600_000;

// ------------------------------------------------------------------------------------- the store
/** The secrets of a SOPS store file, decrypted with sops-age (not kms-sync's code): name → raw value. */
export async function readSopsStore(storeFile: string, ageKeyFile: string): Promise<Record<string, string>> {
  if (!existsSync(storeFile) || statSync(storeFile).isDirectory() || !existsSync(ageKeyFile)) return {};
  const identity = readFileSync(ageKeyFile, 'utf8')
    .split('\n')
    .find((l) => l.startsWith('AGE-SECRET-KEY-1'));
  if (!identity) return {};
  const decoded = (await decryptSops(readFileSync(storeFile, 'utf8'), { secretKey: identity, fileType: 'yaml' })) as {
    secrets?: Record<string, { value: string }>;
  };
  return Object.fromEntries(Object.entries(decoded.secrets ?? {}).map(([name, s]) => [name, s.value]));
}

// ------------------------------------------------------------------------------ kills and windows
/** The windows a kill can land in (Trace.classify: from the pipeline points the processes passed). */
export const KILL_WINDOWS = [
  'issued-not-journaled',
  'journaled-not-stored',
  'stored-not-cleared',
  'revoke-sent',
  'other',
] as const;
export type KillWindow = (typeof KILL_WINDOWS)[number];

/** The KMS_SYNC_TEST_TRACE file: `<point> <pid>` lines, appended synchronously by every process. */
export class Trace {
  private offset = 0;
  readonly file: string;
  constructor(file: string) {
    this.file = file;
  }
  private lines(): { point: string; pid: number }[] {
    if (!existsSync(this.file)) return [];
    return readFileSync(this.file, 'utf8')
      .split('\n')
      .filter(Boolean)
      .map((l) => {
        const [point, pid] = l.split(' ');
        return { point: point!, pid: Number(pid) };
      });
  }
  /** Forget what is traced so far: `last` and `waitFor` look at what comes after. */
  mark() {
    this.offset = this.lines().length;
  }
  since() {
    return this.lines().slice(this.offset);
  }
  /** The last point reached since `mark`, by any process (or by `pid`). */
  last(pid?: number): string | undefined {
    const ls = this.since().filter((l) => pid === undefined || l.pid === pid);
    return ls[ls.length - 1]?.point;
  }
  /**
   * The windows open at this moment in the processes traced since `mark`: a process that passed
   * issue-sent more often than after-journal has a key issued but not journaled, and so on (a
   * process runs several key writes at once, so its last point alone would say little); a
   * process whose last point is before-revoke or revoke-sent has a revoke on the wire.
   */
  openWindows(settledIssues = 0): Set<KillWindow> {
    const open = new Set<KillWindow>();
    const byPid = new Map<number, string[]>();
    for (const l of this.since()) byPid.set(l.pid, [...(byPid.get(l.pid) ?? []), l.point]);
    for (const points of byPid.values()) {
      const n = (p: string) => points.filter((x) => x === p).length;
      if (n('issue-sent') - settledIssues > n('after-journal')) open.add('issued-not-journaled');
      if (n('after-journal') > n('after-store')) open.add('journaled-not-stored');
      if (n('after-store') > n('cleared')) open.add('stored-not-cleared');
      if (['before-revoke', 'revoke-sent'].includes(points[points.length - 1]!)) open.add('revoke-sent');
    }
    return open;
  }
  /** The window a kill now lands in: the aimed one when it is open, else the latest open one, else other. */
  /**
   * `settledIssues`: key-issuing requests of the process that will never reach after-journal
   * because the run settled them otherwise (a lost response re-read and recorded as orphans).
   */
  classify(aimed?: KillWindow, settledIssues = 0): KillWindow {
    const open = this.openWindows(settledIssues);
    if (aimed && open.has(aimed)) return aimed;
    for (const w of ['revoke-sent', 'stored-not-cleared', 'journaled-not-stored', 'issued-not-journaled'] as const)
      if (open.has(w)) return w;
    return 'other';
  }
  /** The first of `points` reached since `mark`, if any. */
  seen(points: string[]): string | undefined {
    return this.since().find((l) => points.includes(l.point))?.point;
  }
  async waitFor(points: string[], ms: number, stop: () => boolean = () => false): Promise<string | undefined> {
    await waitFor(() => this.seen(points) !== undefined || stop(), ms);
    return this.seen(points);
  }
}

// ------------------------------------------------------------------------------------- figures
export interface Figures {
  scenario: string;
  seed: number;
  runs: number;
  kills: number;
  /** SIGKILLs per window, from the trace (the last point the killed process reached). */
  killsByWindow: Record<KillWindow, number>;
  keysIssued: number;
  keysLost: number;
  strays: number;
  failures: string[];
  notes: string[];
  /** Why the scenario did not run (terraform absent). */
  skipped?: string;
}

export function newFigures(scenario: string, seed: number): Figures {
  return {
    scenario,
    seed,
    runs: 0,
    kills: 0,
    killsByWindow: Object.fromEntries(KILL_WINDOWS.map((w) => [w, 0])) as Record<KillWindow, number>,
    keysIssued: 0,
    keysLost: 0,
    strays: 0,
    failures: [],
    notes: [],
  };
}

export function formatFigures(f: Figures): string {
  const w = KILL_WINDOWS.map((x) => `${x} ${f.killsByWindow[x]}`).join(', ');
  return `${f.scenario} (seed ${f.seed}): ${f.runs} runs, ${f.kills} SIGKILLs [${w}]; keys issued ${f.keysIssued}, lost ${f.keysLost}, strays ${f.strays}; ${f.failures.length ? `FAIL (${f.failures.length})` : 'ok'}`;
}

/**
 * What a problem is about, so that a key that stays wrong is reported once (where it was first
 * seen): its kind and the first key id it names; else the whole text.
 */
export function problemKey(problem: string): string {
  const kind = /^(LOST|STRAY|MISSING)/.exec(problem)?.[1];
  const id = /\(([0-9a-f]{8}-[0-9a-f-]{27})\)/.exec(problem)?.[1];
  return kind && id ? `${kind} ${id}` : problem;
}

// ------------------------------------------------------------------------------- the invariant
export interface WantedKey {
  client: string;
  key: string;
  overlap: boolean;
  secret: string;
  /** The generation that is wanted (Terraform: the key id in the state); default: the newest live one. */
  id?: string;
}

export interface InvariantInput {
  emu: Emulator;
  projectEnv: string;
  /** Keys the configuration wants, with the secret name its raw value must be under. */
  wanted: WantedKey[];
  /** The store as it is now (secret name → raw value). */
  stored: Record<string, string>;
  /** Clients the configuration owns (keys of other clients are not its business). */
  ownedClients?: (name: string) => boolean;
  /** What `plan` (or drift) printed when it had changes: a live key it names (by id, or by client and key) is reported. */
  reported: string;
  /** Key prefixes of every raw value a store ever held: an overlap generation must be one of them. */
  everHeld?: Set<string>;
  /** Accept the raw value under any secret name (several targets share one store), not only the key's own. */
  anySecret?: boolean;
}

export interface InvariantResult {
  problems: string[];
  lost: number;
  strays: number;
  lostIds: string[];
  strayIds: string[];
  live: LiveKey[];
}

/**
 * The invariant, from the service's live keys and the store, independently of kms-sync's code.
 * A live key is fine when it is the newest generation of a wanted key and its raw value is in the
 * store under the key's secret and validates; or an older generation of a key with an overlap
 * (the newest-but-one, or an older one replaced less than the overlap ago), or without one when it expires within the default overlap of 7 days
 * after its replacement (and a store once held it); or `plan` reports it. Otherwise it is lost (wanted, no raw value held)
 * or a stray (not wanted, not reported).
 */
export async function checkInvariant(i: InvariantInput): Promise<InvariantResult> {
  const problems: string[] = [];
  const lostIds: string[] = [];
  const strayIds: string[] = [];
  const live = (await i.emu.liveKeys(i.projectEnv)).filter((k) => !i.ownedClients || i.ownedClients(k.client));
  const isReported = (k: LiveKey) =>
    i.reported.includes(k.id) || new RegExp(`\\b${k.client}/${k.name}\\b`).test(i.reported);
  const groups = new Map<string, LiveKey[]>();
  for (const k of live) groups.set(`${k.client}/${k.name}`, [...(groups.get(`${k.client}/${k.name}`) ?? []), k]);
  for (const [addr, gens] of groups) {
    gens.sort((a, b) => (a.createdAt < b.createdAt ? -1 : a.createdAt > b.createdAt ? 1 : 0));
    const w = i.wanted.find((x) => `${x.client}/${x.key}` === addr);
    for (const [n, k] of gens.entries()) {
      const current = w?.id ? k.id === w.id : n === gens.length - 1;
      if (w && current) {
        let raw = i.stored[w.secret];
        if (i.anySecret && !raw?.startsWith(k.keyPrefix))
          raw = Object.values(i.stored).find((v) => v.startsWith(k.keyPrefix)) ?? raw;
        if (raw?.startsWith(k.keyPrefix) && (await i.emu.validates(i.projectEnv, k.clientId, k.name, raw))) continue;
        if (isReported(k)) continue;
        lostIds.push(k.id);
        problems.push(
          `LOST: live key ${addr} (${k.id}) is wanted but the store ${raw ? 'holds another value' : 'holds nothing'} under ${w.secret}, and plan does not report it`,
        );
      } else if (
        w &&
        !w.id &&
        w.overlap &&
        // The newest-but-one; or an older one whose successor came within the overlap (two
        // rotations within the hour: each generation stays valid for the overlap after its own
        // replacement, as kms-sync documents, then it is revoked).
        (n === gens.length - 2 ||
          (n < gens.length - 2 && Date.parse(gens[n + 1]!.createdAt) + CONFIG_OVERLAP_MS > Date.now())) &&
        (!i.everHeld || i.everHeld.has(k.keyPrefix) || isReported(k))
      ) {
      } else if (
        w &&
        !w.id &&
        !w.overlap &&
        n < gens.length - 1 &&
        k.expiresAt &&
        Date.parse(k.expiresAt) <= Date.parse(gens[n + 1]!.createdAt) + DEFAULT_OVERLAP_MS + 60_000 &&
        (!i.everHeld || i.everHeld.has(k.keyPrefix))
      ) {
      } else if (w && !w.id && w.overlap && n === gens.length - 2) {
        lostIds.push(k.id);
        problems.push(
          `LOST: overlap generation ${addr} (${k.id}) was never held by any store, and plan does not report it`,
        );
      } else if (!isReported(k)) {
        strayIds.push(k.id);
        const why = !w
          ? 'not in the configuration'
          : w.id
            ? `not the generation the state tracks (${w.id})`
            : `an old generation (no overlap asked for${w.overlap ? ' beyond one' : ''}; expires ${k.expiresAt ?? 'never'}, replaced ${gens[n + 1]?.createdAt ?? '-'}${i.everHeld && !i.everHeld.has(k.keyPrefix) ? ', never held' : ''}), its raw value no longer held`;
        problems.push(`STRAY: live key ${addr} (${k.id}) is ${why}, and plan does not report it`);
      }
    }
  }
  for (const w of i.wanted)
    if (w.id && !live.some((k) => k.id === w.id))
      problems.push(`MISSING: the tracked key ${w.client}/${w.key} (${w.id}) is not live`);
  for (const w of i.wanted)
    if (!w.id && !groups.has(`${w.client}/${w.key}`) && !i.reported.includes(`${w.client}/${w.key}`))
      problems.push(`MISSING: wanted key ${w.client}/${w.key} is not live and plan does not say so`);
  return { problems, lost: lostIds.length, strays: strayIds.length, lostIds, strayIds, live };
}

// --------------------------------------------------------------------------------- aimed kills
/** Where a kill is aimed: at a random moment, or inside one window. */
export type Aim = 'random' | Exclude<KillWindow, 'other'>;
export const AIMS: Aim[] = [
  'random',
  'issued-not-journaled',
  'journaled-not-stored',
  'stored-not-cleared',
  'revoke-sent',
];

const ISSUING = [
  ['PUT', '/client/{client_uuid}'],
  ['POST', '/client'],
] as const;
const REVOKE = ['DELETE', '/client/{client_uuid}'] as const;

/** The environment a run gets so that the aimed window stays open long enough to kill inside it. */
export function aimEnv(aim: Aim, holdMs = patient(2000)): Record<string, string> {
  if (aim === 'journaled-not-stored') return { KMS_SYNC_TEST_PAUSE: `after-journal:${holdMs}` };
  if (aim === 'stored-not-cleared') return { KMS_SYNC_TEST_PAUSE: `after-store:${holdMs}` };
  if (aim === 'revoke-sent') return { KMS_SYNC_TEST_PAUSE: `before-revoke:${holdMs},revoke-sent:${holdMs}` };
  return {};
}

/**
 * Emulator faults for the aim: the service commits a key and holds its response back (issued, not
 * journaled), or drops a revoke before committing it (the revoke goes out and is lost).
 */
export async function aimFaults(emus: Emulator[], aim: Aim, holdMs = 2000) {
  for (const emu of emus) {
    if (aim === 'issued-not-journaled')
      await emu.faults(
        ISSUING.map(([method, route]) => ({ method, route, mode: 'delay-after-commit', delayMs: holdMs, times: 3 })),
      );
    if (aim === 'revoke-sent') await emu.faults([{ method: REVOKE[0], route: REVOKE[1], mode: 'drop', times: 50 }]);
  }
}

/** Key-issuing requests and revokes the services have seen so far. */
export async function routeTotals(emus: Emulator[]) {
  let issued = 0;
  let revokes = 0;
  for (const emu of emus) {
    const c = await emu.counts();
    for (const [m, r] of ISSUING) issued += c[`${m} ${r}`] ?? 0;
    revokes += c[`${REVOKE[0]} ${REVOKE[1]}`] ?? 0;
  }
  return { issued, revokes };
}

export interface AimedKill {
  aim: Aim;
  trace: Trace;
  emus: Emulator[];
  r: Rng;
  /** True once the run is over (nothing to kill any more). */
  exited: () => boolean;
  /** The pid to SIGKILL when the moment comes (terraform, or its provider child). */
  victim: () => number | undefined;
  /** For `random`: the kill comes after this many ms. */
  randomMs?: [number, number];
  waitMs?: number;
}

/**
 * Call right after starting the run (with aimEnv and aimFaults in place). Waits for the aimed
 * window, SIGKILLs the victim and returns the window the trace says the kill landed in; undefined
 * when the run ended (or never reached the window) before a kill.
 */
export async function aimAndKill(o: AimedKill): Promise<KillWindow | undefined> {
  const before = await routeTotals(o.emus);
  const waitMs = o.waitMs ?? 60_000;
  let ready = false;
  if (o.aim === 'random') {
    const [lo, hi] = o.randomMs ?? [50, 2500];
    const end = Date.now() + o.r.int(lo, hi);
    ready = (await waitFor(() => Date.now() >= end || o.exited(), hi + 1000)) && !o.exited();
  } else if (o.aim === 'issued-not-journaled') {
    ready =
      (await waitFor(
        async () =>
          o.exited() ||
          (o.trace.seen(['issue-sent']) !== undefined && (await routeTotals(o.emus)).issued > before.issued),
        waitMs,
      )) && !o.exited();
    if (ready) await sleep(o.r.int(0, 300));
  } else if (o.aim === 'journaled-not-stored' || o.aim === 'stored-not-cleared') {
    ready =
      (await o.trace.waitFor(
        [o.aim === 'journaled-not-stored' ? 'after-journal' : 'after-store'],
        waitMs,
        o.exited,
      )) !== undefined && !o.exited();
    if (ready) await sleep(o.r.int(0, 300));
  } else {
    ready =
      (await waitFor(
        async () =>
          o.exited() ||
          o.trace.seen(['before-revoke', 'revoke-sent']) !== undefined ||
          (await routeTotals(o.emus)).revokes > before.revokes,
        waitMs,
      )) && !o.exited();
    if (ready) await sleep(o.r.int(0, 100));
  }
  const pid = ready ? o.victim() : undefined;
  if (pid === undefined || o.exited()) return undefined;
  let landed = o.trace.classify(o.aim === 'random' ? undefined : o.aim);
  // The revoke points may not be traced (yet): the service seeing the DELETE is the evidence.
  if (o.aim === 'revoke-sent' && landed !== 'revoke-sent' && (await routeTotals(o.emus)).revokes > before.revokes)
    landed = 'revoke-sent';
  try {
    process.kill(pid, 'SIGKILL');
  } catch {
    return undefined; // it ended meanwhile
  }
  return landed;
}

// ------------------------------------------------------- a lost key-issuing response, then a kill
/**
 * Where a kill is aimed once the service has committed a key-issuing request and dropped its
 * answer (the run settles it by re-reading: it records the lost key, re-issues it, revokes it):
 * while the re-issue is held before it commits (a 429 with a long Retry-After: the issue 40
 * window, where only the journal says which old keys are owed a revoke), in each window of the
 * re-issue, on a revoke (of the lost key or of a superseded one), or at random after the drop.
 */
export type LostAim = 'reissue-unsent' | Exclude<KillWindow, 'other'> | 'random';
export const LOST_AIMS: LostAim[] = [
  'reissue-unsent',
  'issued-not-journaled',
  'journaled-not-stored',
  'stored-not-cleared',
  'revoke-sent',
  'random',
];

/** The environment of a run whose first key-issuing response is dropped, aimed at `aim` after it. */
export function lostResponseEnv(aim: LostAim, holdMs = 2000): Record<string, string> {
  if (aim === 'revoke-sent') return { KMS_SYNC_TEST_PAUSE: `revoke-sent:${holdMs}` };
  return aim === 'journaled-not-stored' || aim === 'stored-not-cleared' ? aimEnv(aim, holdMs) : {};
}

/**
 * Emulator faults: the next key-issuing PUT commits and its answer is dropped; the one after it
 * (the re-issue, when the run sends one request at a time) is throttled or held for the aim.
 * Revokes are not dropped: the kill is aimed at the first or the second one (the lost key's, then
 * a superseded key's), held at revoke-sent before it goes out.
 */
export async function lostResponseFaults(emus: Emulator[], aim: LostAim, holdMs = 2000) {
  const [method, route] = ISSUING[0];
  const rules: unknown[] = [{ method, route, mode: 'drop-after-commit', times: 1 }];
  if (aim === 'reissue-unsent') rules.push({ method, route, mode: '429', retryAfterSeconds: 30, times: 1 });
  if (aim === 'issued-not-journaled')
    rules.push({ method, route, mode: 'delay-after-commit', delayMs: holdMs, times: 1 });
  for (const emu of emus) await emu.faults(rules);
}

/**
 * Call right after starting the run (with lostResponseEnv and lostResponseFaults in place, and
 * `before` = routeTotals taken before it started). Waits for the drop, then for the aimed point
 * after it, SIGKILLs the victim and returns the window the trace says the kill landed in;
 * undefined when the run ended before.
 */
export async function killAfterLostResponse(
  o: Omit<AimedKill, 'aim' | 'randomMs'> & { aim: LostAim; before: { issued: number; revokes: number } },
): Promise<KillWindow | undefined> {
  const waitMs = o.waitMs ?? 60_000;
  const issues = () => o.trace.since().filter((l) => l.point === 'issue-sent').length;
  const until = async (cond: () => Promise<boolean> | boolean) =>
    (await waitFor(async () => o.exited() || (await cond()), waitMs)) && !o.exited();
  let ready: boolean;
  if (o.aim === 'random') ready = await until(async () => (await routeTotals(o.emus)).issued > o.before.issued);
  else if (o.aim === 'reissue-unsent') ready = await until(() => issues() >= 2);
  else if (o.aim === 'issued-not-journaled')
    ready = await until(async () => issues() >= 2 && (await routeTotals(o.emus)).issued >= o.before.issued + 2);
  else if (o.aim === 'revoke-sent') {
    // The first or the second revoke; one reached while a store write is still under way counts
    // in that window, so the kill waits for a revoke that is the last point passed.
    const nth = o.r.int(1, 2);
    ready = await until(
      () => o.trace.since().filter((l) => l.point === 'revoke-sent').length >= nth && o.trace.last() === 'revoke-sent',
    );
  } else
    ready = await until(
      () =>
        issues() >= 2 &&
        o.trace.seen([o.aim === 'journaled-not-stored' ? 'after-journal' : 'after-store']) !== undefined,
    );
  if (ready) await sleep(o.aim === 'random' ? o.r.int(0, 600) : o.r.int(0, 150));
  const pid = ready ? o.victim() : undefined;
  if (pid === undefined || o.exited()) return undefined;
  // Once the re-issue is on its way, the dropped request is settled (its key recorded as an orphan).
  const landed = o.trace.classify(
    o.aim === 'random' ? undefined : o.aim === 'reissue-unsent' ? 'issued-not-journaled' : o.aim,
    issues() >= 2 ? 1 : 0,
  );
  try {
    process.kill(pid, 'SIGKILL');
  } catch {
    return undefined; // it ended meanwhile
  }
  return landed;
}

/**
 * Superseded keys of `rotate --revoke-old` runs still live: a key the run was asked to revoke is
 * fine only while it is still the newest generation of its key (its rotation never took effect).
 */
export function supersededLive(live: LiveKey[], superseded: { id: string; client: string; name: string }[]): LiveKey[] {
  return superseded.flatMap((s) => {
    const k = live.find((x) => x.id === s.id);
    if (!k) return [];
    const newer = live.some(
      (x) => x.client === k.client && x.name === k.name && x.id !== k.id && x.createdAt > k.createdAt,
    );
    return newer ? [k] : [];
  });
}

/** A temporary folder with a trace file and an output sink, removed by `cleanup`. */
export function workspace(prefix: string) {
  const dir = mkdtempSync(path.join(tmpdir(), `kms-sync-${prefix}-`));
  const emus: Emulator[] = [];
  return {
    dir,
    outputs: [] as string[],
    trace: new Trace(path.join(dir, 'trace')),
    ageKeyFile: path.join(dir, 'age', 'keys.txt'),
    async emulator(apiKey: string) {
      const emu = await new Emulator(path.join(dir, `emulator-${emus.length}.json`), apiKey).start();
      emus.push(emu);
      return emu;
    },
    cleanup() {
      for (const e of emus) e.stop();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
