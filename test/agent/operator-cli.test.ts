// Operating a running agent from the command line (issue 36): `kms-sync agent status|reconcile|
// suspend|resume` as Flux's `flux get|reconcile|suspend|resume`, against a real agent process with a
// token (read from a file or the environment, never a flag value), text and JSON output and exit
// codes; the emergency override of a closed sync window (one reconcile, on record); an invalid
// revision shown with its own subject and its errors at their path in the repository, escaped on
// the terminal; and the docs' metric table compared with what /metrics serves.
import { spawn } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { createServer, type AddressInfo, type Socket } from 'node:net';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { cli, printedSecrets, repoRoot } from '../crash/lib.js';
import { agentConfig, fixture, logged, startAgent, until, type AgentProc, type Fixture } from './lib.js';
import { patient } from '../support/patience.js';

const ENV = 'agent-production';
const TOKEN = 'operator-cli-token-0123456789abcdef';
const DAYS = ['Sun', 'Mon', 'Tue', 'Wed', 'Thu', 'Fri', 'Sat'];

interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
}

describe('kms-sync agent status|reconcile|suspend|resume against a running agent', () => {
  let f: Fixture;
  let agent: AgentProc;
  let tokenFile: string;
  /** `kms-sync agent …` as a real process, with its own stdout and stderr (no token in its environment unless given). */
  const run = (args: string[], env: Record<string, string> = {}): Promise<Run> =>
    new Promise((resolve) => {
      const child = spawn(process.execPath, [cli, 'agent', ...args], {
        cwd: f.root,
        env: { PATH: process.env.PATH, HOME: f.root, TMPDIR: process.env.TMPDIR, ...env },
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      let stdout = '';
      let stderr = '';
      child.stdout.on('data', (d: Buffer) => {
        stdout += d.toString();
      });
      child.stderr.on('data', (d: Buffer) => {
        stderr += d.toString();
      });
      child.on('close', (code) => {
        f.outputs.push(stdout, stderr);
        resolve({ code, stdout, stderr });
      });
    });
  const withToken = () => ['--url', agent.url, '--token', `file:${tokenFile}`];

  beforeAll(async () => {
    f = await fixture();
    tokenFile = path.join(f.root, 'ui-token');
    writeFileSync(tokenFile, `${TOKEN}\n`, { mode: 0o600 });
    f.repo.push({ 'kms/kms-sync.yaml': agentConfig([{ name: 'alpha', keys: ['primary'] }]) }, 'first');
    // A sync window that is closed all of today (three days from now, UTC): writes wait, unless overridden.
    const closed = `${DAYS[(new Date().getUTCDay() + 3) % 7]} 00:00-01:00`;
    agent = await startAgent(
      f,
      [
        '--path',
        'kms',
        '--interval',
        '1h',
        '--mode',
        'sync',
        '--sync-window',
        closed,
        '--ui-token',
        'env:KMS_SYNC_UI_TOKEN',
      ],
      { KMS_SYNC_UI_TOKEN: TOKEN },
    );
    await until(agentWithToken(), 'the first reconcile', (x) => x.reconciles === 1);
  }, patient(60_000));
  afterAll(async () => {
    agent?.child.kill('SIGTERM');
    await agent?.exit;
    expect(printedSecrets(f.outputs)).toEqual([]);
    await f.cleanup();
  });
  /** The agent with the token on its reads (the test's own look at /api/status). */
  function agentWithToken(): AgentProc {
    const auth = { authorization: `Bearer ${TOKEN}` };
    return {
      ...agent,
      status: async () => JSON.parse((await agent.get('/api/status', auth)).text),
      metrics: async () => (await agent.get('/metrics', auth)).text,
    };
  }

  it(
    'status: text and JSON with the token from a file or KMS_SYNC_UI_TOKEN; without it, exit 1 and why',
    async () => {
      const text = await run(['status', ...withToken()]);
      expect(text.stderr).toBe('');
      expect(text.code).toBe(0);
      expect(text.stdout).toMatch(/^Ready +True ReconciliationSucceeded/m);
      expect(text.stdout).toMatch(/^Windows .*\(UTC\): closed at the last reconcile/m);
      expect(text.stdout).toMatch(
        /^Last +success .*outside the sync window\(s\): \d+ operation\(s\) planned, not applied/m,
      );
      expect(text.stdout).toMatch(new RegExp(`^  ${ENV} +OutOfSync`, 'm'));
      const json = await run(['status', '--url', agent.url, '--json'], { KMS_SYNC_UI_TOKEN: TOKEN });
      expect(json.code).toBe(0);
      const s = JSON.parse(json.stdout);
      expect(s.condition).toMatchObject({ type: 'Ready', status: 'True' });
      expect(s.agent.syncWindowOpen).toBe(false);

      // The help says where the address and the token come from.
      expect((await run(['status', '--help'])).stdout).toMatch(
        /KMS_SYNC_AGENT_URL[\s\S]*KMS_SYNC_UI_TOKEN[\s\S]*Exit codes: 0 the agent is Ready/,
      );
      const refused = await run(['status', '--url', agent.url]);
      expect(refused.code).toBe(1);
      expect(refused.stderr).toMatch(/wants its token \(401\): give it with --token file:PATH/);
      const wrong = await run(['status', '--url', agent.url, '--token', 'env:T'], { T: 'not-the-token-0123456789' });
      expect(wrong.code).toBe(1);
      expect(wrong.stderr).toMatch(/the one given was refused/);
      // A token value on the command line is refused before anything is sent: ps would show it.
      const inline = await run(['status', '--url', agent.url, '--token', TOKEN]);
      expect(inline.code).toBe(1);
      expect(inline.stderr).toMatch(/give env:NAME or file:PATH/);
      // A port nothing listens on (one the system just handed out and took back).
      const port = await new Promise<number>((resolve) => {
        const srv = createServer().listen(0, '127.0.0.1', () => {
          const p = (srv.address() as AddressInfo).port;
          srv.close(() => resolve(p));
        });
      });
      const down = await run(['status', '--url', `http://127.0.0.1:${port}`, '--token', `file:${tokenFile}`]);
      expect(down.code).toBe(1);
      expect(down.stderr).toContain(`cannot reach the agent at http://127.0.0.1:${port} (ECONNREFUSED)`);
    },
    patient(60_000),
  );

  it(
    'reconcile waits for the result; --override-sync-window writes in a closed window for that one reconcile only, on record',
    async () => {
      const plain = await run(['reconcile', ...withToken()]);
      expect(plain.code).toBe(0);
      expect(plain.stdout).toMatch(/^Reconciled: success .*\(manual, .*outside the sync window/m);
      expect(await f.emu.clients(ENV)).toEqual([]);

      const forced = await run(['reconcile', ...withToken(), '--override-sync-window', '--json']);
      expect(forced.code).toBe(0);
      const r = JSON.parse(forced.stdout);
      expect(r).toMatchObject({
        reconcile: 'accepted',
        syncWindowOverride: true,
        record: { result: 'success', trigger: 'manual', syncWindowOverride: true },
      });
      expect(r.record.applied).toBeGreaterThan(0);
      expect((await f.emu.clients(ENV)).map((c) => c.name)).toEqual(['alpha']);
      const anyway = /outside the sync window\(s\): writing anyway, for this reconcile, as an operator asked/;
      expect(await logged(agent, anyway)).toMatch(anyway);
      expect((await agent.get('/', { authorization: `Bearer ${TOKEN}` })).text).toContain('sync window overridden');

      // The next reconcile is back inside the window's rule: a pushed client waits.
      f.repo.push(
        {
          'kms/kms-sync.yaml': agentConfig([
            { name: 'alpha', keys: ['primary'] },
            { name: 'beta', keys: ['primary'] },
          ]),
        },
        'beta',
      );
      const after = await run(['reconcile', ...withToken(), '--json']);
      expect(after.code).toBe(0);
      expect(JSON.parse(after.stdout).record.syncWindowOverride).toBeUndefined();
      expect((await f.emu.clients(ENV)).map((c) => c.name)).toEqual(['alpha']);
    },
    patient(90_000),
  );

  it(
    'suspend and resume; reconcile while suspended exits 2',
    async () => {
      const suspended = await run(['suspend', ...withToken()]);
      expect(suspended.code).toBe(0);
      expect(suspended.stdout).toMatch(/^Reconciliation suspended/);
      expect((await agentWithToken().status()).agent.suspended).toBe(true);
      const refused = await run(['reconcile', ...withToken()]);
      expect(refused.code).toBe(2);
      expect(refused.stdout).toMatch(/suspended: nothing reconciled/);
      expect((await run(['status', ...withToken()])).stdout).toMatch(/^Suspended +yes/m);
      const resumed = await run(['resume', ...withToken(), '--json']);
      expect(resumed.code).toBe(0);
      expect(JSON.parse(resumed.stdout)).toEqual({ suspended: false });
    },
    patient(60_000),
  );

  it(
    'an invalid revision: reconcile and status exit 2 and show its own subject, escaped, and its errors at their path in the repository',
    async () => {
      // A subject that would retitle the terminal and a broken field.
      const subject = 'broken \u001b]0;pwned\u0007 limits';
      const bad = f.repo.push(
        {
          'kms/kms-sync.yaml': agentConfig([{ name: 'alpha', keys: ['primary'] }]).replace(
            'rateLimitDay: 100000',
            'rateLimitDay: lots',
          ),
        },
        subject,
      );
      const r = await run(['reconcile', ...withToken()]);
      expect(r.code).toBe(2);
      expect(r.stdout).toMatch(/^Reconcile ended: invalid /m);
      expect(r.stdout).toContain(`revision ${bad.slice(0, 12)} "broken \\u001b]0;pwned\\u0007 limits"`);
      expect(r.stdout).toMatch(/^ {2}kms\/kms-sync\.yaml:\d+:\d+: /m);
      expect(r.stdout).not.toMatch(/\u001b|\u0007/);
      const s = await run(['status', ...withToken()]);
      expect(s.code).toBe(2);
      expect(s.stdout).toMatch(/^Ready +False InvalidRevision/m);
      expect(s.stdout).toMatch(new RegExp(`^Invalid +${bad.slice(0, 12)}: not applied`, 'm'));
      expect(s.stdout).toMatch(/^ {14}kms\/kms-sync\.yaml:\d+:\d+: /m);
      const status = await agentWithToken().status();
      expect(status.lastReconcile).toMatchObject({ revision: bad, subject, result: 'invalid' });
    },
    patient(60_000),
  );

  it(
    'an emptied configuration is invalid with advice that fits the agent (--allow-empty), never the last good revision; with --allow-empty it is reconciled and changes nothing',
    async () => {
      const before = (await agentWithToken().status()).revision.lastGood;
      const empty = f.repo.push({ 'kms/kms-sync.yaml': 'apiVersion: kms-sync/v1\nprojects: []\n' }, 'empty it');
      const r = await run(['reconcile', ...withToken(), '--json']);
      expect(r.code).toBe(2);
      const record = JSON.parse(r.stdout).record;
      expect(record).toMatchObject({ result: 'invalid', revision: empty, subject: 'empty it' });
      expect(record.errors[0]).toMatch(
        /^kms: the configuration of revision [0-9a-f]{12} defines no project or environment .*run the agent with --allow-empty/,
      );
      expect(record.errors.join('\n')).not.toMatch(/pass --allow-empty to plan/);
      const s = await agentWithToken().status();
      expect(s.revision.lastGood).toBe(before);
      expect((await f.emu.clients(ENV)).map((c) => c.name)).toEqual(['alpha']);

      const allowing = await startAgent(f, [
        '--path',
        'kms',
        '--state-dir',
        path.join(f.root, 'state-empty'),
        '--interval',
        '1h',
        '--mode',
        'sync',
        '--allow-empty',
      ]);
      try {
        const t = await until(allowing, 'the empty revision reconciled', (x) => x.lastReconcile !== undefined);
        expect(t.lastReconcile).toMatchObject({ result: 'success', revision: empty, applied: 0 });
        expect(t.revision.lastGood).toBe(empty);
        expect((await f.emu.clients(ENV)).map((c) => c.name)).toEqual(['alpha']);
      } finally {
        allowing.child.kill('SIGTERM');
        await allowing.exit;
      }
    },
    patient(60_000),
  );

  it('the metric table of docs/agent.md is what /metrics serves: families, label names, snake_case values, process_* unprefixed', async () => {
    const doc = readFileSync(path.join(repoRoot, 'docs', 'agent.md'), 'utf8');
    const table = doc.slice(doc.indexOf('| family | labels | what |'));
    const documented = new Map<string, string[]>();
    for (const line of table.split('\n').slice(2)) {
      if (!line.startsWith('| `')) break;
      const [family, labels] = line
        .split('|')
        .slice(1, 3)
        .map((c) => c.trim());
      documented.set(family!.replace(/`/g, ''), [...labels!.matchAll(/`([a-z_]+)`/g)].map((m) => m[1]!).sort());
    }
    const text = await agentWithToken().metrics();
    const served = new Set([...text.matchAll(/^# TYPE (kms_sync_\w+) /gm)].map((m) => m[1]!));
    expect([...documented.keys()].sort()).toEqual([...served].sort());
    // Each series' label names are the documented ones (histograms add `le`).
    for (const m of text.matchAll(/^(kms_sync_\w+?)(?:_bucket|_sum|_count)?\{([^}]*)\} /gm)) {
      const family = documented.has(m[1]!) ? m[1]! : m[1]!.replace(/_(bucket|sum|count)$/, '');
      const names = [...m[2]!.matchAll(/(\w+)="/g)]
        .map((x) => x[1]!)
        .filter((n) => n !== 'le')
        .sort();
      expect(names, m[0]).toEqual(documented.get(family));
      // Values are snake_case words, but for what is named by someone else: an environment, a revision, the condition's words.
      for (const [, name, value] of m[2]!.matchAll(/(\w+)="([^"]*)"/g)) {
        if (!['environment', 'revision', 'status', 'type', 'le'].includes(name!))
          expect(value, `${m[0]}`).toMatch(/^[a-z0-9_]+$/);
      }
    }
    expect(text).toMatch(/^process_cpu_seconds_total /m);
    expect(text).toMatch(/^process_resident_memory_bytes /m);
    expect(text).toMatch(/^nodejs_heap_size_used_bytes /m);
    expect(text).not.toMatch(/^kms_sync_(process|nodejs)_/m);
    expect(text).toMatch(/^kms_sync_api_requests_total\{kind="[a-z]+_[a-z_]+"\} /m);
  });

  it(
    '--git-timeout: a git server that accepts and never answers is cut off and reported as timed out; status shows it',
    async () => {
      const held: Socket[] = [];
      const silent = createServer((socket) => {
        held.push(socket);
        socket.on('error', () => undefined);
      });
      await new Promise<void>((r) => silent.listen(0, '127.0.0.1', r));
      const url = `http://127.0.0.1:${(silent.address() as AddressInfo).port}/acme/kms.git`;
      const stuck = await startAgent(f, [
        '--repo',
        url,
        '--state-dir',
        path.join(f.root, 'state-timeout'),
        '--interval',
        '1h',
        '--mode',
        'detect',
        '--git-timeout',
        '2s',
      ]);
      try {
        // Within a minute on a loaded machine: git's own wait (no time limit) or the old fixed 120 s would not be.
        const s = await until(stuck, 'the fetch timed out', (x) => x.lastReconcile !== undefined, 60_000);
        expect(s.lastReconcile.result).toBe('source_error');
        expect(s.sourceError).toMatch(
          /^git fetch timed out after 2 s \(--git-timeout\) against http:\/\/127\.0\.0\.1:\d+\/acme\/kms\.git$/,
        );
        expect(s.condition).toMatchObject({ status: 'False', reason: 'SourceUnreachable' });
        const shown = await run(['status', '--url', stuck.url]);
        expect(shown.code).toBe(2);
        expect(shown.stdout).toMatch(/^Source err +git fetch timed out after 2 s/m);
      } finally {
        stuck.child.kill('SIGTERM');
        await stuck.exit;
        for (const socket of held) socket.destroy();
        await new Promise((r) => silent.close(r));
      }
    },
    patient(90_000),
  );
});
