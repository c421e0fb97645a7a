// The agent's https credential (KMS_SYNC_GIT_TOKEN) against a real git smart-HTTP server (git
// http-backend behind a local server that demands the token): without it the fetch is refused and
// reported; with it the commit is fetched and applied; the token is in no log line, no URL and not
// in the checkout's .git/config.
import { spawn } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { printedSecrets } from '../crash/lib.js';
import { agentConfig, fixture, startAgent, until, type Fixture } from './lib.js';
import { skipWhen } from '../support/skip.js';
import { patient } from '../support/patience.js';

const TOKEN = 'git-token-for-the-agent-test-0123456789';
const GIT_HTTP_BACKEND = '/usr/lib/git-core/git-http-backend';

/** git's smart HTTP (CGI git-http-backend) for the fixture's root, behind a check of the token. */
async function gitServer(root: string): Promise<{ url: string; refused: () => number; close: () => Promise<void> }> {
  let refused = 0;
  const expected = `Basic ${Buffer.from(`x-access-token:${TOKEN}`).toString('base64')}`;
  const server: Server = createServer((req, res) => {
    if (req.headers.authorization !== expected) {
      refused++;
      res.writeHead(401, { 'www-authenticate': 'Basic realm="git"' });
      res.end();
      return;
    }
    const url = new URL(req.url ?? '/', 'http://git');
    const cgi = spawn(GIT_HTTP_BACKEND, [], {
      env: {
        GIT_PROJECT_ROOT: root,
        GIT_HTTP_EXPORT_ALL: '1',
        PATH_INFO: url.pathname,
        QUERY_STRING: url.search.slice(1),
        REQUEST_METHOD: req.method ?? 'GET',
        CONTENT_TYPE: req.headers['content-type'] ?? '',
        HTTP_CONTENT_ENCODING: String(req.headers['content-encoding'] ?? ''),
        GIT_PROTOCOL: String(req.headers['git-protocol'] ?? ''),
        REMOTE_ADDR: '127.0.0.1',
        PATH: process.env.PATH,
      },
    });
    req.pipe(cgi.stdin);
    const chunks: Buffer[] = [];
    cgi.stdout.on('data', (c: Buffer) => chunks.push(c));
    cgi.on('close', () => {
      const out = Buffer.concat(chunks);
      const end = out.indexOf('\r\n\r\n');
      const head = out.subarray(0, end).toString('latin1').split('\r\n');
      const headers: Record<string, string> = {};
      let status = 200;
      for (const line of head) {
        const [k, ...v] = line.split(':');
        if (k!.toLowerCase() === 'status') status = Number(v.join(':').trim().split(' ')[0]);
        else headers[k!.toLowerCase()] = v.join(':').trim();
      }
      res.writeHead(status, headers);
      res.end(out.subarray(end + 4));
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    refused: () => refused,
    close: () =>
      new Promise((r) => {
        server.close(() => r());
        server.closeAllConnections();
      }),
  };
}

const present = existsSync(GIT_HTTP_BACKEND);

describe.skipIf(skipWhen(!present, `the agent's git token test needs ${GIT_HTTP_BACKEND} (Debian's git package)`))(
  'the agent fetching over HTTP with a token',
  () => {
    let f: Fixture;
    let git: Awaited<ReturnType<typeof gitServer>>;
    beforeAll(async () => {
      f = await fixture();
      git = await gitServer(f.root);
    });
    afterAll(async () => {
      expect(printedSecrets(f.outputs)).toEqual([]);
      expect(f.outputs.join('\n')).not.toContain(TOKEN);
      await git.close();
      await f.cleanup();
    });

    it(
      'is refused without KMS_SYNC_GIT_TOKEN and fetches with it; the token is stored nowhere',
      async () => {
        const rev = f.repo.push({ 'kms/kms-sync.yaml': agentConfig([{ name: 'alpha', keys: ['primary'] }]) }, 'first');
        const repoUrl = `${git.url}/origin.git`;
        const without = await startAgent(f, ['--repo', repoUrl, '--path', 'kms', '--interval', '1s']);
        const s = await until(without, 'the refused fetch', (x) => x.lastReconcile?.result === 'source_error');
        expect(s.sourceError).toMatch(/git fetch failed/);
        expect(git.refused()).toBeGreaterThan(0);
        without.child.kill('SIGTERM');
        expect(await without.exit).toBe(0);

        const agent = await startAgent(f, ['--repo', repoUrl, '--path', 'kms', '--interval', '1s'], {
          KMS_SYNC_GIT_TOKEN: TOKEN,
        });
        await until(agent, 'the commit applied', (x) => x.revision.synced === rev);
        agent.child.kill('SIGTERM');
        expect(await agent.exit).toBe(0);
        expect(readFileSync(path.join(f.stateDir, 'source', '.git', 'config'), 'utf8')).not.toContain(TOKEN);
        expect(readFileSync(path.join(f.stateDir, 'source', '.git', 'config'), 'utf8')).toContain(repoUrl);
      },
      patient(90_000),
    );
  },
);
