// The agent's webhooks against a network peer without the secret (issue 35), `kms-sync agent` as a
// real process on loopback: a missing or malformed signature and an oversized Content-Length are
// answered before any of the body is sent; an oversized body gets its 413 (not a reset); the bodies
// read at once are capped, so ~400 slow connections do not grow the agent's memory; a replayed
// delivery (same id, or same body under a new id) is answered without reconciling again.
import { readFileSync } from 'node:fs';
import { request } from 'node:http';
import { connect, type Socket } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { printedSecrets, waitFor } from '../crash/lib.js';
import {
  agentConfig,
  fixture,
  githubSignature,
  GITLAB_TOKEN,
  startAgent,
  until,
  type AgentProc,
  type Fixture,
} from './lib.js';
import { patient } from '../support/patience.js';

const WELL_FORMED = `sha256=${'0'.repeat(64)}`;

/** A raw connection: writes `head` (and `body`), resolves with the status line of the answer, or undefined if it closed without one. */
function rawRequest(url: string, head: string, body?: Buffer): { socket: Socket; answer: Promise<string | undefined> } {
  const { hostname, port } = new URL(url);
  const socket = connect(Number(port), hostname);
  socket.on('error', () => {});
  let text = '';
  const answer = new Promise<string | undefined>((resolve) => {
    socket.on('data', (d: Buffer) => {
      text += d.toString('latin1');
      if (text.includes('\r\n')) resolve(text.slice(0, text.indexOf('\r\n')));
    });
    socket.on('close', () => resolve(text.includes('\r\n') ? text.slice(0, text.indexOf('\r\n')) : undefined));
  });
  socket.write(head);
  if (body) socket.write(body);
  return { socket, answer };
}

const hookHead = (headers: Record<string, string | number>) =>
  `POST /hooks/github HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nX-GitHub-Event: push\r\n${Object.entries(
    headers,
  )
    .map(([k, v]) => `${k}: ${v}\r\n`)
    .join('')}\r\n`;

const rssMiB = (pid: number) =>
  Number(/VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))![1]) / 1024;

describe('webhook limits', () => {
  let f: Fixture;
  let agent: AgentProc;
  beforeAll(async () => {
    f = await fixture();
    f.repo.push({ 'kms/kms-sync.yaml': agentConfig([{ name: 'alpha', keys: ['primary'] }]) }, 'first');
    agent = await startAgent(f, ['--path', 'kms', '--interval', '1h']);
    await until(agent, 'the first reconcile', (s) => s.reconciles >= 1, 60_000);
  }, patient(120_000));
  afterAll(async () => {
    agent?.child.kill('SIGTERM');
    await agent?.exit;
    expect(printedSecrets(f.outputs)).toEqual([]);
    await f.cleanup();
  });

  it(
    'refuses before the body: a missing or malformed signature (401), a Content-Length over 1 MiB (413)',
    async () => {
      // Headers only: the answer must come without a byte of the announced body.
      for (const [headers, status] of [
        [{ 'Content-Length': 1_000_000 }, '401'],
        [{ 'Content-Length': 1_000_000, 'X-Hub-Signature-256': 'sha256=zz' }, '401'],
        [{ 'Content-Length': 1_000_000, 'X-Hub-Signature-256': 'sha1=0123' }, '401'],
        [{ 'Content-Length': 50_000_000, 'X-Hub-Signature-256': WELL_FORMED }, '413'],
      ] as const) {
        const r = rawRequest(agent.url, hookHead(headers));
        const line = await Promise.race([
          r.answer,
          new Promise<string>((resolve) =>
            setTimeout(() => resolve(`no answer within ${patient(5_000)} ms`), patient(5_000)),
          ),
        ]);
        r.socket.destroy();
        expect(line, JSON.stringify(headers)).toMatch(new RegExp(`^HTTP/1\\.1 ${status} `));
      }
      // A client that sends the whole oversized body anyway reads the 413, not a reset.
      const big = await fetch(`${agent.url}/hooks/github`, {
        method: 'POST',
        body: Buffer.alloc(3 << 20, 0x61),
        headers: { 'x-hub-signature-256': WELL_FORMED },
      });
      expect(big.status).toBe(413);
      // Without a Content-Length (chunked), past 1 MiB: 413 as well.
      const chunked = await new Promise<number>((resolve, reject) => {
        const req = request(
          `${agent.url}/hooks/github`,
          { method: 'POST', headers: { 'x-hub-signature-256': WELL_FORMED, 'transfer-encoding': 'chunked' } },
          (res) => {
            res.resume();
            resolve(res.statusCode ?? 0);
          },
        );
        req.on('error', reject);
        const chunk = Buffer.alloc(64 << 10, 0x61);
        let sent = 0;
        const more = () => {
          while (sent < 2 << 20) {
            sent += chunk.length;
            if (!req.write(chunk)) {
              req.once('drain', more);
              return;
            }
          }
          req.end();
        };
        more();
      }).catch((e: Error) => `error ${e.message}`);
      expect(chunked).toBe(413);
    },
    patient(120_000),
  );

  it(
    "~400 slow connections holding most of a 1 MiB body each: refused beyond the cap, the agent's memory stays bounded",
    async () => {
      const pid = agent.child.pid!;
      const before = rssMiB(pid);
      const part = Buffer.alloc(900_000, 0x61);
      const conns = Array.from({ length: 400 }, () =>
        rawRequest(agent.url, hookHead({ 'Content-Length': 1_000_000, 'X-Hub-Signature-256': WELL_FORMED }), part),
      );
      try {
        // Every connection either got its answer (refused: too many at once) or handed all of its part to the kernel.
        const written = conns.map(
          (c) =>
            new Promise<void>((resolve) => {
              if (c.socket.writableLength === 0) resolve();
              c.socket.on('drain', () => resolve());
              c.socket.on('close', () => resolve());
            }),
        );
        expect(
          await waitFor(
            async () =>
              await Promise.race([
                Promise.all(written).then(() => true),
                new Promise<boolean>((r) => setTimeout(() => r(false), 200)),
              ]),
            60_000,
          ),
        ).toBe(true);
        // The agent reads what it accepted; its resident memory, sampled for a while, stays bounded.
        let peak = 0;
        const end = Date.now() + 3_000;
        while (Date.now() < end) {
          peak = Math.max(peak, rssMiB(pid));
          await new Promise((r) => setTimeout(r, 100));
        }
        // Each connection beyond the cap is answered 503 (on a loaded machine some answers come later).
        let refused = 0;
        for (const c of conns)
          void c.answer.then((a) => {
            if (a !== undefined && / 503 /.test(a)) refused++;
          });
        await waitFor(() => refused >= 380, 30_000);
        console.log(
          `webhook flood: RSS ${before.toFixed(1)} MiB before, peak ${peak.toFixed(1)} MiB with 400 slow connections (${refused} answered 503)`,
        );
        expect(refused).toBeGreaterThanOrEqual(380);
        // Before the cap: +340 MiB (each connection held its 900 kB); with it, the 4 MiB of bodies and the sockets.
        expect(peak - before).toBeLessThan(100);
      } finally {
        for (const c of conns) c.socket.destroy();
      }
      // Once they are gone, a good delivery gets through again.
      const body = JSON.stringify({ ref: 'refs/heads/main', after: 'after-the-flood' });
      expect(
        await waitFor(
          async () =>
            (
              await agent.post('/hooks/github', body, {
                'x-hub-signature-256': githubSignature(body),
                'x-github-event': 'push',
                'x-github-delivery': 'after-flood',
              })
            ).status === 202,
          20_000,
        ),
      ).toBe(true);
    },
    patient(120_000),
  );

  it(
    'a replayed delivery is answered 200 without reconciling again (GitHub: same id or same body; GitLab: same Idempotency-Key)',
    async () => {
      // The agent logs "reconcile requested" before it answers 202, but its output reaches this process
      // later through a pipe: the log is counted once it has caught up with the deliveries the agent
      // says (in /metrics, answered in order) it accepted, here and in the tests before.
      const requested = () =>
        agent
          .output()
          .split('\n')
          .filter((l) => /reconcile requested(?! through)/.test(l)).length;
      const accepted = async () =>
        [
          ...(await agent.metrics()).matchAll(
            /kms_sync_webhook_requests_total\{provider="\w+",result="accepted"\} (\d+)/g,
          ),
        ]
          .map((m) => Number(m[1]))
          .reduce((a, b) => a + b, 0);
      const expectLogged = async (n: number) => {
        await waitFor(() => requested() === n, 15_000);
        expect(requested(), 'the agent\'s "reconcile requested" log lines').toBe(n);
      };
      const acceptedBefore = await accepted();
      await expectLogged(acceptedBefore);
      const start = requested();
      const body = JSON.stringify({ ref: 'refs/heads/main', after: 'replay-1' });
      const signed = {
        'x-hub-signature-256': githubSignature(body),
        'x-github-event': 'push',
        'x-github-delivery': '5b1a0c2e-replay',
      };
      const first = await agent.post('/hooks/github', body, signed);
      expect(first.status).toBe(202);
      for (const headers of [signed, signed, { ...signed, 'x-github-delivery': 'a-fresh-id-on-a-captured-body' }]) {
        const again = await agent.post('/hooks/github', body, headers);
        expect(again.status).toBe(200);
        expect(JSON.parse(again.text)).toEqual({ reconcile: 'duplicate' });
      }
      // Another body under an id seen before: a replay too.
      const other = JSON.stringify({ ref: 'refs/heads/main', after: 'replay-2' });
      expect(
        (await agent.post('/hooks/github', other, { ...signed, 'x-hub-signature-256': githubSignature(other) })).status,
      ).toBe(200);
      // GitLab's delivery id.
      const gl = {
        'x-gitlab-token': GITLAB_TOKEN,
        'x-gitlab-event': 'Push Hook',
        'idempotency-key': '908a6d9e-45fd-46c8-97e6-c4f350f219dd',
      };
      expect(
        (await agent.post('/hooks/gitlab', JSON.stringify({ ref: 'refs/heads/main', after: 'gl-1' }), gl)).status,
      ).toBe(202);
      expect(
        (await agent.post('/hooks/gitlab', JSON.stringify({ ref: 'refs/heads/main', after: 'gl-1', retry: true }), gl))
          .status,
      ).toBe(200);
      // Two reconciles were asked for, no more: the agent counted two, and logged two as it took them.
      expect((await accepted()) - acceptedBefore).toBe(2);
      await expectLogged(start + 2);
      expect(await agent.metrics()).toMatch(
        /kms_sync_webhook_requests_total\{provider="github",result="duplicate"\} 4/,
      );
    },
    patient(120_000),
  );
});
