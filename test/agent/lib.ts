// Shared pieces of the agent's tests (issue 29): a bare git repository on disk that the test
// pushes commits to, the emulator as its own process (test/crash/lib.ts), and `kms-sync agent`
// as a real process whose HTTP server the test talks to.
import { execFileSync } from 'node:child_process';
import { createHmac } from 'node:crypto';
import { request as httpRequest } from 'node:http';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, expect } from 'vitest';
import { cli, Emulator, kmsSync, printedSecrets, spawnProc, waitFor, type Proc } from '../crash/lib.js';
import { patient } from '../support/patience.js';

export const API_KEY = 'sk_test_agentsuite0000000001';
export const GITHUB_SECRET = 'gh-webhook-secret-for-the-agent-test';
export const GITLAB_TOKEN = 'gl-webhook-token-for-the-agent-test';

export interface ClientSpec {
  name: string;
  keys: string[];
  ip?: string;
}

/** A configuration of one environment (`<slug>-production`) with these clients. */
export function agentConfig(clients: ClientSpec[], slug = 'agent'): string {
  const lines = [
    'apiVersion: kms-sync/v1',
    `owner: agent-test-${slug}`,
    'projects:',
    `  - slug: ${slug}`,
    '    name: Agent',
    '    environments:',
    '      - type: production',
    `        url: https://api.${slug}.example`,
    '        templates:',
    '          - { name: std, rateLimitDay: 100000, maxClients: 1000 }',
    '        endpoints:',
    '          - { method: GET, path: /v1/orders, name: Orders }',
    '        clients:',
  ];
  if (clients.length === 0) lines[lines.length - 1] = '        clients: []';
  for (const c of clients) {
    lines.push(
      `          - name: ${c.name}`,
      '            template: std',
      ...(c.ip !== undefined ? [`            ipWhitelist: [${c.ip}]`] : []),
      '            keys:',
    );
    // A key is a name, or a flow mapping written out (`{ name: primary, ttl: 20d }`).
    for (const k of c.keys) lines.push(`              - ${k.startsWith('{') ? k : `{ name: ${k} }`}`);
  }
  return `${lines.join('\n')}\n`;
}

/** A bare repository (default branch main) and a working clone the test commits in. */
export class Repo {
  readonly root: string;
  readonly origin: string;
  readonly work: string;
  constructor(root: string) {
    this.root = root;
    this.origin = path.join(root, 'origin.git');
    this.work = path.join(root, 'work');
    this.git(root, ['init', '-q', '--bare', '-b', 'main', this.origin]);
    this.git(root, ['init', '-q', '-b', 'main', this.work]);
    this.git(this.work, ['remote', 'add', 'origin', this.origin]);
  }
  get url(): string {
    return `file://${this.origin}`;
  }
  private git(cwd: string, args: string[]): string {
    return execFileSync('git', args, {
      cwd,
      env: { PATH: process.env.PATH, HOME: this.root, GIT_CONFIG_NOSYSTEM: '1', LC_ALL: 'C' },
      encoding: 'utf8',
    }).trim();
  }
  /** Adds a symbolic link to the next commit (git keeps links as links). */
  link(file: string, target: string): void {
    mkdirSync(path.dirname(path.join(this.work, file)), { recursive: true });
    symlinkSync(target, path.join(this.work, file));
    this.git(this.work, ['add', file]);
  }
  /**
   * Writes files (path inside the repository → text), commits and pushes; returns the commit id.
   * `signingKey`: an ssh private key file the commit is signed with (gpg.format ssh).
   */
  push(files: Record<string, string>, message: string, signingKey?: string): string {
    for (const [file, text] of Object.entries(files)) {
      mkdirSync(path.dirname(path.join(this.work, file)), { recursive: true });
      writeFileSync(path.join(this.work, file), text);
      this.git(this.work, ['add', file]);
    }
    const sign = signingKey ? ['-c', 'gpg.format=ssh', '-c', `user.signingkey=${signingKey}`] : [];
    this.git(this.work, [
      '-c',
      'user.name=Test',
      '-c',
      'user.email=test@example.com',
      ...sign,
      'commit',
      '-q',
      ...(signingKey ? ['-S'] : []),
      '-m',
      message,
    ]);
    this.git(this.work, ['push', '-q', 'origin', 'HEAD:main']);
    return this.git(this.work, ['rev-parse', 'HEAD']);
  }
}

export interface Fixture {
  root: string;
  repo: Repo;
  emu: Emulator;
  stateDir: string;
  outputs: string[];
  procs: Proc[];
  cleanup(): Promise<void>;
}

export async function fixture(): Promise<Fixture> {
  const root = mkdtempSync(path.join(tmpdir(), 'kms-sync-agent-'));
  const repo = new Repo(root);
  const emu = await new Emulator(path.join(root, 'emulator.json'), API_KEY).start();
  const procs: Proc[] = [];
  const outputs: string[] = [];
  return {
    root,
    repo,
    emu,
    stateDir: path.join(root, 'state'),
    outputs,
    procs,
    cleanup: async () => {
      for (const p of procs) p.child.kill('SIGKILL');
      emu.stop();
      rmSync(root, { recursive: true, force: true });
    },
  };
}

/**
 * The test file's fixture, made before its first test with one commit (kms/kms-sync.yaml: client
 * alpha, key primary) and removed after its last test, which first checks that nothing printed a
 * raw key or any of `secrets`. `use` receives it: `let f: Fixture; sharedFixture((x) => { f = x; })`.
 */
export function sharedFixture(use: (f: Fixture) => void, secrets: string[] = []): void {
  let f: Fixture | undefined;
  beforeAll(async () => {
    f = await fixture();
    f.repo.push({ 'kms/kms-sync.yaml': agentConfig([{ name: 'alpha', keys: ['primary'] }]) }, 'first');
    use(f);
  }, patient(120_000));
  afterAll(async () => {
    if (!f) return;
    expect(printedSecrets(f.outputs)).toEqual([]);
    for (const secret of secrets) expect(f.outputs.join('\n')).not.toContain(secret);
    await f.cleanup();
  });
}

export interface AgentProc extends Proc {
  url: string;
  /** The agent's own pid on this machine (as a container's PID 1: not the unshare wrapper's). */
  pid(): number | undefined;
  get(p: string, headers?: Record<string, string>): Promise<{ status: number; text: string }>;
  post(p: string, body?: string, headers?: Record<string, string>): Promise<{ status: number; text: string }>;
  status(): Promise<any>;
  metrics(): Promise<string>;
}

/** Whether the agent can be run as PID 1 of its own PID and UTS namespaces here (root, unshare). */
export function canUnshare(): boolean {
  if (process.getuid?.() !== 0 || !existsSync('/usr/bin/unshare')) return false;
  try {
    return (
      execFileSync('unshare', ['--pid', '--fork', '--uts', '--mount-proc', 'sh', '-c', 'echo $$'], {
        encoding: 'utf8',
        timeout: patient(10_000),
      }).trim() === '1'
    );
  } catch {
    return false;
  }
}

/** The children of a process (Linux /proc). */
function childrenOf(pid: number): number[] {
  try {
    return readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8').trim().split(/\s+/).filter(Boolean).map(Number);
  } catch {
    return [];
  }
}

/**
 * Starts `kms-sync agent` as a real process; resolves once its server listens. `asPid1`: as a
 * container runs it, PID 1 of a new PID namespace with its own host name (UTS namespace), through
 * `unshare --pid --fork --uts --mount-proc`; a SIGKILL of its pid() ends the namespace like an OOM kill.
 */
export async function startAgent(
  f: Fixture,
  args: string[],
  extraEnv: Record<string, string> = {},
  asPid1?: { hostname: string },
): Promise<AgentProc> {
  const env: NodeJS.ProcessEnv = {
    PATH: process.env.PATH,
    HOME: f.root,
    TMPDIR: process.env.TMPDIR,
    KMS_API_URL: f.emu.url,
    KMS_API_KEY: API_KEY,
    KMS_SYNC_GITHUB_WEBHOOK_SECRET: GITHUB_SECRET,
    KMS_SYNC_GITLAB_WEBHOOK_TOKEN: GITLAB_TOKEN,
    ...extraEnv,
  };
  const repo = args.includes('--repo') ? [] : ['--repo', f.repo.url];
  const agentArgs = ['agent', ...repo, '--listen', '127.0.0.1:0', '--state-dir', f.stateDir, ...args];
  const proc = asPid1
    ? spawnProc(
        'unshare',
        [
          '--pid',
          '--fork',
          '--uts',
          '--mount-proc',
          '--kill-child=SIGTERM',
          'sh',
          '-c',
          'hostname "$0" && exec "$@"',
          asPid1.hostname,
          process.execPath,
          cli,
          ...agentArgs,
        ],
        { cwd: f.root, env, sink: f.outputs },
      )
    : kmsSync(agentArgs, { cwd: f.root, env, sink: f.outputs });
  f.procs.push(proc);
  let exited = false;
  void proc.exit.then(() => {
    exited = true;
  });
  if (!(await waitFor(() => exited || /listening on http:\/\/[^\s"]+/.test(proc.output()), 20_000)) || exited) {
    throw new Error(`the agent did not start:\n${proc.output()}`);
  }
  const url = /listening on (http:\/\/[^\s"]+)/.exec(proc.output())![1]!;
  // One connection per request (Connection: close), never one kept alive from an earlier request:
  // the agent closes idle ones after 5 s, and a test whose event loop was held longer (a spawnSync
  // of the CLI on a loaded host) would send its next request into one the agent is closing
  // ("other side closed"). A string body is text/plain unless said otherwise, as fetch sends it.
  const call = (method: string, p: string, body?: string, headers: Record<string, string> = {}) =>
    new Promise<{ status: number; text: string }>((resolve, reject) => {
      const typed = Object.keys(headers).some((h) => h.toLowerCase() === 'content-type');
      const req = httpRequest(
        `${url}${p}`,
        {
          method,
          agent: false,
          headers: {
            ...(body !== undefined && !typed ? { 'content-type': 'text/plain;charset=UTF-8' } : {}),
            ...headers,
          },
        },
        (res) => {
          const chunks: Buffer[] = [];
          res.on('data', (c: Buffer) => chunks.push(c));
          res.on('end', () => resolve({ status: res.statusCode ?? 0, text: Buffer.concat(chunks).toString('utf8') }));
          res.on('error', reject);
        },
      );
      req.on('error', reject);
      req.end(body);
    });
  const pid = () => (asPid1 ? childrenOf(proc.child.pid!)[0] : proc.child.pid);
  return {
    ...proc,
    url,
    pid,
    get: (p, h) => call('GET', p, undefined, h),
    post: (p, b, h) => call('POST', p, b, h),
    status: async () => JSON.parse((await call('GET', '/api/status')).text),
    metrics: async () => (await call('GET', '/metrics')).text,
  };
}

/** Headers of a write to the agent's API (POST /api/…): a JSON body. */
export const JSON_BODY = { 'content-type': 'application/json' };

export function githubSignature(body: string, secret = GITHUB_SECRET): string {
  return `sha256=${createHmac('sha256', secret).update(body).digest('hex')}`;
}

/**
 * The agent's output once it holds `what` (or once `ms`, scaled by patient(), has passed). What the
 * agent logs before an HTTP answer reaches this process through a pipe, and may come after that
 * answer: a line is waited for, never looked for once right after the event that logs it.
 */
export async function logged(agent: Proc, what: RegExp | string, ms = 15_000): Promise<string> {
  const holds = () => (typeof what === 'string' ? agent.output().includes(what) : what.test(agent.output()));
  await waitFor(holds, ms);
  return agent.output();
}

/**
 * Waits for a condition on the agent's status; fails with the last status and the agent's log. The
 * status is asked again as soon as the agent logs something (it logs each reconcile's end after
 * updating its status, and each write it applies), and at least every 200 ms otherwise: not every
 * 10 ms, which cost ~2 ms of CPU an ask between the agent and this process.
 */
export async function until(agent: AgentProc, what: string, cond: (s: any) => boolean, ms = 20_000): Promise<any> {
  let last: any;
  const ok = await waitFor(async () => cond((last = await agent.status())), ms, { wake: () => agent.output().length });
  if (!ok)
    throw new Error(
      `timed out waiting for ${what}; last status: ${JSON.stringify({ revision: last?.revision, last: last?.lastReconcile }, null, 1)}\n--- agent output ---\n${agent.output().slice(-4000)}`,
    );
  return last;
}
