// Issue 34 (files and sizes) and issue 42 against `kms-sync agent` as a real process: a committer
// on the watched branch links configuration files to host files (/proc/self/environ, a mounted
// secret), makes the --path folder a link, or pushes a huge file or a 16 MB value. The agent
// refuses each revision with a clear error and reconciles against the last good one; neither
// /api/status, the page nor the log holds a byte of the host files. An agent killed while loading
// a revision (as by memory) twice in a row does not load it a third time after its restart.
import { readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { waitFor } from '../crash/lib.js';
import { agentConfig, fixture, startAgent, until, type AgentProc, type Fixture } from './lib.js';
import { patient } from '../support/patience.js';

const CONFIG = 'config/kms-sync.yaml';
const MOUNTED_SECRET = 'mounted-secret-Zr8Qw2Nx5Tb7Kc';
const RUNNER_VAR = 'RUNNER_MARKER';
const RUNNER_VALUE = 'agent-env-value-91be44d0aa';
const ENGINE = /RangeError|TypeError|Maximum call stack|^\s+at .+:\d+:\d+\)?$/m;

/** Records every commit status and notification the agent sends. */
async function recorder(): Promise<{ url: string; bodies: { path: string; body: string }[]; close: () => void }> {
  const bodies: { path: string; body: string }[] = [];
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      bodies.push({ path: req.url ?? '', body: Buffer.concat(chunks).toString('utf8') });
      res.writeHead(201, { 'content-type': 'application/json' });
      res.end('{}');
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, bodies, close: () => server.close() };
}

async function stop(agent: AgentProc): Promise<void> {
  agent.child.kill('SIGTERM');
  await agent.exit;
}

/** Everything the agent shows: its status, its page and its log. */
async function everything(agent: AgentProc): Promise<string> {
  return `${JSON.stringify(await agent.status())}\n${(await agent.get('/')).text}\n${agent.output()}`;
}

describe('kms-sync agent and a hostile revision', () => {
  let f: Fixture;
  let good: string;
  beforeAll(async () => {
    f = await fixture();
    good = f.repo.push({ [CONFIG]: agentConfig([{ name: 'alpha', keys: ['primary'] }]) }, 'good');
  });
  afterAll(async () => f.cleanup());
  // An agent a failed test left running would reconcile the next test's revisions on the same state folder.
  beforeEach(async () => {
    for (const p of f.procs)
      if (p.child.exitCode === null && p.child.signalCode === null) {
        p.child.kill('SIGKILL');
        await p.exit;
      }
  });

  it(
    'links to host files and a linked --path folder: refused before reading, nothing of them shown',
    async () => {
      const secretFile = path.join(f.root, 'mounted-password');
      writeFileSync(secretFile, `${MOUNTED_SECRET}\n`);
      const sink = await recorder();
      const agent = await startAgent(
        f,
        [
          '--path',
          'config',
          '--mode',
          'sync',
          '--interval',
          '1s',
          '--commit-status',
          'github',
          '--status-repo',
          'acme/kms',
        ],
        {
          [RUNNER_VAR]: RUNNER_VALUE,
          GITHUB_TOKEN: 'ghp_hostileconfigtest000000000000000000',
          GITHUB_API_URL: `${sink.url}/github`,
          KMS_SYNC_NOTIFY_WEBHOOK: `${sink.url}/slack/T0/B0/x`,
        },
      );
      await until(agent, 'the good revision synced', (s) => s.revision.synced === good);
      f.repo.link('config/env.yaml', '/proc/self/environ');
      f.repo.link('config/db.yaml', secretFile);
      const linked = f.repo.push({}, 'links to host files');
      const s = await until(
        agent,
        'the linked revision refused',
        (x) => x.revision.invalid?.revision === linked && x.lastReconcile?.result === 'invalid',
      );
      const errors = s.revision.invalid.errors.join('\n');
      expect(errors).toContain('config/env.yaml: is a symbolic link: the agent follows no links in its configuration');
      expect(errors).toContain('config/db.yaml: is a symbolic link');
      expect(s.lastReconcile.note).toContain(`reconciling against the last good one, ${good.slice(0, 12)}`);
      // The failure went out as a commit status on the linked revision and a notification.
      expect(
        await waitFor(
          () =>
            sink.bodies.some((b) => b.path.endsWith(linked)) &&
            sink.bodies.some((b) => b.path.startsWith('/slack/') && b.body.includes(':x:')),
          15_000,
        ),
      ).toBe(true);
      const shown = `${await everything(agent)}\n${sink.bodies.map((b) => b.body).join('\n')}`;
      expect(shown).not.toContain(MOUNTED_SECRET);
      expect(shown).not.toContain(RUNNER_VALUE);
      await stop(agent);
      sink.close();

      // The whole --path folder a link (to a folder of the checkout, or anywhere).
      f.repo.link('linked', 'config');
      const folder = f.repo.push({}, 'a linked folder');
      const viaLink = await startAgent(f, ['--path', 'linked', '--mode', 'detect', '--interval', '1s'], {
        [RUNNER_VAR]: RUNNER_VALUE,
      });
      const v = await until(viaLink, 'the linked --path refused', (x) => x.revision.invalid?.revision === folder);
      expect(v.revision.invalid.errors.join('\n')).toMatch(/linked: is a symbolic link/);
      expect(await everything(viaLink)).not.toContain(RUNNER_VALUE);
      await stop(viaLink);
    },
    patient(60_000),
  );

  it(
    "a file over the size limit is refused from git's tree; a 16 MB value under a raised limit gets its file:line; neither a stack trace",
    async () => {
      // The links of the last test become plain files again (never written through).
      for (const file of ['config/env.yaml', 'config/db.yaml']) rmSync(path.join(f.repo.work, file));
      const huge = `${agentConfig([{ name: 'alpha', keys: ['primary'] }]).replace('template: std', `template: "${'t'.repeat(16 * 1024 * 1024)}"`)}`;
      const big = f.repo.push(
        {
          'config/env.yaml': 'apiVersion: kms-sync/v1\n',
          'config/db.yaml': 'apiVersion: kms-sync/v1\n',
          [CONFIG]: huge,
        },
        'a 16 MB value',
      );
      const limited = await startAgent(f, ['--path', 'config', '--mode', 'detect', '--interval', '1s']);
      const s = await until(limited, 'the big revision refused', (x) => x.revision.invalid?.revision === big);
      expect(s.revision.invalid.errors.join('\n')).toContain(
        'config/kms-sync.yaml: the file is larger than the limit of 5 MB per configuration file (16 MB)',
      );
      await stop(limited);
      const raised = await startAgent(f, [
        '--path',
        'config',
        '--mode',
        'detect',
        '--interval',
        '1s',
        '--max-file-size',
        '40MB',
      ]);
      const r = await until(raised, 'the 16 MB value reported', (x) => x.revision.invalid?.revision === big, 60_000);
      const errors = r.revision.invalid.errors.join('\n');
      expect(errors).toMatch(
        /config\/kms-sync\.yaml:\d+:\d+: projects\[0\]\.environments\[0\]\.clients\[0\]\.template: template "t{200}…" \(16777016 more\) is not defined/,
      );
      const shown = await everything(raised);
      expect(shown).not.toMatch(ENGINE);
      expect(shown.length).toBeLessThan(400_000);
      await stop(raised);
    },
    patient(120_000),
  );

  it(
    'killed twice while loading a revision (as by memory): after the restart it is invalid, and the last good one is reconciled',
    async () => {
      const heavy = f.repo.push(
        {
          [CONFIG]: agentConfig([
            { name: 'alpha', keys: ['primary'] },
            { name: 'beta', keys: ['primary'] },
          ]),
        },
        'a revision the agent dies on',
      );
      const trace = path.join(f.root, 'trace');
      for (let attempt = 1; attempt <= 2; attempt++) {
        writeFileSync(trace, '');
        const victim = await startAgent(f, ['--path', 'config', '--mode', 'sync', '--interval', '1s'], {
          KMS_SYNC_TEST_PAUSE: 'config-load:60000',
          KMS_SYNC_TEST_TRACE: trace,
        });
        expect(
          await waitFor(() => readFileSync(trace, 'utf8').includes('config-load'), 45_000),
          `load ${attempt} reached:\n${victim.output().slice(-3000)}`,
        ).toBe(true);
        victim.child.kill('SIGKILL');
        await victim.exit;
        expect(JSON.parse(readFileSync(path.join(f.stateDir, 'loading-revision'), 'utf8'))).toMatchObject({
          revision: heavy,
          attempts: attempt,
        });
        expect(readFileSync(path.join(f.stateDir, 'loading-revision'), 'utf8')).not.toContain('errors');
      }
      const agent = await startAgent(f, ['--path', 'config', '--mode', 'sync', '--interval', '1s']);
      const s = await until(
        agent,
        'the revision it died on reported invalid',
        (x) => x.revision.invalid?.revision === heavy && x.lastReconcile?.result === 'invalid',
      );
      expect(s.revision.invalid.errors.join('\n')).toContain(
        `the agent was killed 2 times while loading revision ${heavy.slice(0, 12)}`,
      );
      expect(s.revision.lastGood).not.toBe(heavy);
      // Nothing of the revision it died on was applied (beta is only in it).
      expect((await f.emu.clients('agent-production')).map((c) => c.name)).not.toContain('beta');
      // A fixed revision is loaded again as usual.
      const fixed = f.repo.push(
        {
          [CONFIG]: agentConfig([{ name: 'alpha', keys: ['primary'] }]).replace('maxClients: 1000', 'maxClients: 999'),
        },
        'fixed',
      );
      await until(
        agent,
        'the fixed revision synced',
        (x) => x.revision.synced === fixed && x.revision.invalid === undefined,
      );
      await stop(agent);
    },
    patient(90_000),
  );
});
